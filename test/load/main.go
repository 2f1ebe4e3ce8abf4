// Command load compares toolgate with a bare reverse proxy, with nginx
// when it is installed, and with no proxy at all, under the same load in
// the same run, on loopback only.
//
//	go run ./test/load                      # full run, about 12.5 minutes of load
//	go run ./test/load -json load.json      # also write every number as JSON
//	go run ./test/load -duration 2s -reps 1 # quick look
//	go run ./test/load -scenarios fixture-plain-c32,fixture-stream-c32,fixture-stream-c1
//	go run ./test/load -scenarios fixture-plain-c32 -reps 1 -profile /tmp/prof  # toolgate's CPU and allocation profiles
//
// It builds toolgate from this checkout, then starts the servers as
// separate processes: a mock Chat Completions upstream (this program with
// -mock), a bare httputil.ReverseProxy to it (-bare), toolgate with a
// generated config whose catalog holds both workloads' tools, and nginx
// (when `nginx` is on PATH, or -nginx names it; see nginx.go). Every
// scenario is driven against each target — direct to the mock, the bare
// proxy, toolgate, nginx — interleaved (each repetition runs every
// scenario on every target, in a rotated order) so a machine that gets
// busier or quieter during the run skews all targets alike.
//
// Two workloads: "small" (payload.go: two short calls, 40 events) and
// "fixture" (testdata/bench: a 2,405-byte answer with calls of 710 and
// 289 bytes of arguments judged against schemas with format, pattern, enum,
// nested required and additionalProperties false; a 13,604-byte stream of
// 40 events). The mock answers with the one the request's X-Mock-Workload
// header names.
//
//	plain-c1            small plain answers (2 tool calls), 1 request in flight
//	plain-c32           small plain answers, 32 in flight (closed loop)
//	open-500            small plain answers sent at a fixed 500/s; latency from the scheduled time
//	stream-c1           small 40-event streams sent as fast as possible, 1 in flight
//	stream-c1-paced     the same with 1 ms between events, as a model writes:
//	                    time to first text byte without the rest of the stream
//	                    competing for the 2 cores
//	stream-c32          small 40-event streams, 32 in flight
//	fixture-plain-c32   fixture plain answers, 32 in flight
//	fixture-stream-c32  fixture streams, 32 in flight
//	fixture-stream-c1   fixture streams paced 1 ms per event, 1 in flight:
//	                    time to the first text byte
//
// Two MCP scenarios run only when -scenarios names them: valid tools/call
// requests of one tool to an MCP server of the Go SDK beside the mock
// (mcp.go), 32 in flight, judged by toolgate against the server's list.
//
//	mcp-call-c32            2025-11-25 sessions: each worker initializes once
//	mcp-call-stateless-c32  2026-07-28 stateless calls, no initialize
//
// The small scenarios run 3 repetitions and the fixture ones 5 unless -reps
// sets one count for all. The mock also counts the connections it accepts,
// which shows whether a proxy reuses its upstream connections.
//
// Every answer is checked: plain answers and streams must be the bytes the
// mock sent (toolgate forwards valid answers unchanged); a stream that
// differs is read as an SDK would (events, [DONE], text, assembled tool
// calls) and counted as truncated or corrupted unless it is equivalent.
// CPU per request comes from each server's /proc/<pid>/stat (nginx's
// master and workers summed). Medians over the repetitions are reported,
// with the ratios the performance targets are stated in, and for the
// fixture a table of throughput and CPU against the bare proxy's.
// Everything is bounded: each scenario runs for -duration, each request has
// -timeout, the whole run has -max-runtime, and the child servers stop when
// this program ends, however it ends.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/baseline"
	"github.com/toolgate/toolgate/test/internal/proc"
)

func main() {
	os.Exit(run())
}

type options struct {
	duration   time.Duration
	warmup     time.Duration
	reps       int
	scenarios  string
	jsonOut    string
	toolgate   string
	logLevel   string
	timeout    time.Duration
	maxRuntime time.Duration
	keep       bool
	nginx      string
	profile    string
	// traceRatio turns toolgate's tracing on at this sample ratio,
	// exporting to the harness's collector; negative is off.
	traceRatio float64
}

func run() int {
	var o options
	mock := flag.Bool("mock", false, "internal: serve the mock upstream")
	bare := flag.String("bare", "", "internal: serve a bare reverse proxy to this URL")
	profiled := flag.String("profiled-toolgate", "", "internal: run toolgate in this process on this config, profiled into -profile")
	lifetime := flag.Duration("lifetime", 15*time.Minute, "internal: longest a -mock or -bare child runs")
	flag.DurationVar(&o.duration, "duration", 4*time.Second, "length of each scenario run")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "warm-up per target before measuring")
	flag.IntVar(&o.reps, "reps", 0, "repetitions of every scenario on every target (0: 3 for the small workload, 5 for the fixture)")
	flag.StringVar(&o.scenarios, "scenarios", strings.Join(scenarioOrder, ","), "scenarios to run, comma separated")
	flag.StringVar(&o.jsonOut, "json", "", "write all results as JSON to this file")
	flag.StringVar(&o.toolgate, "toolgate", "", "use this toolgate binary instead of building one")
	flag.StringVar(&o.logLevel, "log-level", "info", "toolgate's log.level (info is what deployments run: one line per request)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-request timeout")
	flag.DurationVar(&o.maxRuntime, "max-runtime", 25*time.Minute, "hard limit on the whole run")
	flag.StringVar(&o.nginx, "nginx", "auto", `nginx binary for the nginx target ("auto": nginx on PATH if any; "off": no nginx target)`)
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary folder (config, logs, binary)")
	flag.Float64Var(&o.traceRatio, "trace-ratio", -1, "run toolgate with tracing on at this sample_ratio (0 to 1), exporting to an OTLP collector in this process; negative: tracing off")
	flag.StringVar(&o.profile, "profile", "", "run toolgate profiled: its CPU profile (cpu.prof) and allocation profile (allocs.prof) over the whole run go to this folder")
	flag.Parse()

	if o.profile != "" {
		// The profiled child may not share this program's folder.
		abs, err := filepath.Abs(o.profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		o.profile = abs
		if err := os.MkdirAll(abs, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	switch {
	case *profiled != "":
		if o.profile == "" {
			fmt.Fprintln(os.Stderr, "-profiled-toolgate needs -profile")
			return 2
		}
		return serveProfiled(*profiled, o.profile)
	case *mock:
		stats := &mockStats{}
		return serveChild(withMCP(mockHandler(stats)), *lifetime, stats.connState)
	case *bare != "":
		u, err := url.Parse(*bare)
		if err != nil || u.Host == "" {
			fmt.Fprintln(os.Stderr, "-bare needs an upstream URL")
			return 2
		}
		return serveChild(baseline.Proxy(u), *lifetime, nil)
	}

	scs, err := parseScenarios(o.scenarios)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if o.reps < 0 || o.duration <= 0 {
		fmt.Fprintln(os.Stderr, "-reps must be ≥ 0 and -duration > 0")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.maxRuntime)
	defer cancel()
	ctx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	if err := orchestrate(ctx, o, scs); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 1
	}
	return 0
}

// allScenarios are the loads the performance targets are stated for.
var allScenarios = map[string]scenario{
	"plain-c1":  {Name: "plain-c1", Conc: 1},
	"plain-c32": {Name: "plain-c32", Conc: 32},
	"open-500":  {Name: "open-500", Rate: 500},
	"stream-c1": {Name: "stream-c1", Stream: true, Conc: 1},
	// A model writes tokens over time; pacing the events keeps the rest of
	// the stream from competing for the CPU with the first text byte, so
	// this measures the latency a proxy adds, not contention on 2 cores.
	// At about 22 streams a second it runs three times as long as the
	// others, for some 800 samples per target.
	"stream-c1-paced": {Name: "stream-c1-paced", Stream: true, Conc: 1, Gap: pacedGap, Span: 3},
	"stream-c32":      {Name: "stream-c32", Stream: true, Conc: 32},

	"fixture-plain-c32":  {Name: "fixture-plain-c32", Conc: 32, Workload: fixtureWorkload},
	"fixture-stream-c32": {Name: "fixture-stream-c32", Stream: true, Conc: 32, Workload: fixtureWorkload},
	// Paced like stream-c1-paced, for the same reason; twice the run length
	// for some 400 samples per target and repetition.
	"fixture-stream-c1": {Name: "fixture-stream-c1", Stream: true, Conc: 1, Gap: pacedGap, Span: 2, Workload: fixtureWorkload},

	// MCP tools/call, 32 in flight: in 2025-11-25 sessions (each worker
	// initializes once) and stateless 2026-07-28. Not in the default run;
	// name them with -scenarios.
	"mcp-call-c32":           {Name: "mcp-call-c32", Conc: 32, MCP: mcpSession},
	"mcp-call-stateless-c32": {Name: "mcp-call-stateless-c32", Conc: 32, MCP: mcpStateless},
}

// extraScenarios run only when -scenarios names them.
var extraScenarios = []string{"mcp-call-c32", "mcp-call-stateless-c32"}

// scenarioOrder is the default run, and the order errors list them in.
var scenarioOrder = []string{"plain-c1", "plain-c32", "open-500", "stream-c1", "stream-c1-paced", "stream-c32",
	"fixture-plain-c32", "fixture-stream-c32", "fixture-stream-c1"}

// repsFor is how many repetitions a scenario gets: -reps if set, else 5
// for the fixture (the count its targets are stated for) and 3 for the
// small workload.
func repsFor(o options, sc scenario) int {
	switch {
	case o.reps > 0:
		return o.reps
	case sc.Workload == fixtureWorkload:
		return 5
	default:
		return 3
	}
}

// pacedGap spaces the paced stream's events: 40 events take about 40 ms.
const pacedGap = time.Millisecond

func parseScenarios(s string) ([]scenario, error) {
	var out []scenario
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		sc, ok := allScenarios[n]
		if !ok {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", n, strings.Join(append(scenarioOrder[:len(scenarioOrder):len(scenarioOrder)], extraScenarios...), ", "))
		}
		out = append(out, sc)
	}
	return out, nil
}

// target is one way to reach the mock.
type target struct {
	Name string
	URL  string
	// procs are the server processes serving this target, by role.
	procs map[string]*child
}

// report is the JSON output.
type report struct {
	Started time.Time      `json:"started"`
	Machine machineInfo    `json:"machine"`
	Options map[string]any `json:"options"`
	Runs    []runResult    `json:"runs"`
	Summary []summaryRow   `json:"summary"`
	Targets []targetCheck  `json:"targets"`
	// Fixture is the fixture workload's comparison with the bare proxy.
	Fixture  []fixtureRow `json:"fixture_table,omitempty"`
	Warnings []string     `json:"warnings,omitempty"`
}

type machineInfo struct {
	CPUs         int     `json:"cpus"`
	GoVersion    string  `json:"go"`
	LoadAvgStart float64 `json:"loadavg_start"`
	LoadAvgEnd   float64 `json:"loadavg_end"`
	ClockTicks   float64 `json:"clock_ticks"`
}

func orchestrate(ctx context.Context, o options, scs []scenario) error {
	rep := report{Started: time.Now(), Machine: machineInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		LoadAvgStart: loadAvg(), ClockTicks: clockTicks}}
	nginxBin, err := findNginx(o.nginx)
	if err != nil {
		return err
	}
	nTargets := 3
	if nginxBin != "" {
		nTargets = 4
	}
	reps := map[string]int{}
	maxReps := 0
	var planned time.Duration
	for _, sc := range scs {
		reps[sc.Name] = repsFor(o, sc)
		maxReps = max(maxReps, reps[sc.Name])
		planned += time.Duration(nTargets*reps[sc.Name]) * (sc.runLength(o.duration) + 200*time.Millisecond)
	}
	planned += time.Duration(nTargets*4) * o.warmup
	rep.Options = map[string]any{"duration": o.duration.String(), "reps": reps, "warmup": o.warmup.String(),
		"scenarios": o.scenarios, "log_level": o.logLevel, "paced_gap": pacedGap.String(), "nginx": nginxBin}
	fmt.Printf("toolgate load comparison: %d scenarios × %d targets × up to %d reps × %s ≈ %s of load (+ build and start)\n",
		len(scs), nTargets, maxReps, o.duration, planned.Round(time.Second))
	fmt.Printf("machine: %d CPUs, 1-min load average %.2f at start (other work on the machine skews all targets alike, not their ratios)\n",
		rep.Machine.CPUs, rep.Machine.LoadAvgStart)
	if nginxBin == "" {
		fmt.Println("nginx: not on PATH, so no nginx target (Debian package nginx; or -nginx /path/to/nginx)")
	}

	tmp, bin, cleanup, err := proc.Workdir(ctx, "toolgate-load-", o.keep, o.toolgate)
	if err != nil {
		return err
	}
	defer cleanup()
	targets, children, err := startTargets(ctx, o, tmp, bin, nginxBin)
	defer func() {
		for _, c := range children {
			c.stop()
		}
		if c := runCollector; c != nil {
			fmt.Printf("tracing at sample_ratio %g: the collector received %d spans\n", o.traceRatio, c.spans.Load())
			c.close()
		}
	}()
	if err != nil {
		return err
	}
	d := newDriver(o.timeout)
	d.statsURL = targets[0].URL + "/_stats"
	if err := checkAndWarm(ctx, d, targets, scs, o.warmup, tmp); err != nil {
		return err
	}

	for r := range maxReps {
		for k, sc := range scs {
			if r >= reps[sc.Name] {
				continue
			}
			for i := range targets {
				// Rotate the order every repetition and scenario so no
				// target always runs first or right after another.
				t := targets[(i+r+k)%len(targets)]
				if ctx.Err() != nil {
					return errStopped
				}
				res := measure(ctx, d, t, sc, sc.runLength(o.duration))
				res.Rep = r + 1
				rep.Runs = append(rep.Runs, res)
				fmt.Printf("  rep %d  %-18s %-8s %8.0f req/s  p50 %8.0f µs  ok %d  err %d  trunc %d  corrupt %d  load %.1f\n",
					res.Rep, res.Scenario, res.Target, res.RPS, res.P50us, res.OK, res.Errors, res.Truncated, res.Corrupted, res.LoadAvg)
				for _, c := range children {
					if c.exited() {
						return fmt.Errorf("%s exited during the run (log %s)", c.name, c.log)
					}
				}
				// Let connections and the garbage collector settle.
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	rep.Machine.LoadAvgEnd = loadAvg()
	rep.Summary = summarizeRuns(rep.Runs, scs)
	rep.Targets, rep.Warnings = checkTargets(rep.Summary, rep.Runs)
	rep.Fixture = fixtureTable(rep.Summary)
	printReport(os.Stdout, &rep)
	if o.jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", o.jsonOut)
	}
	return nil
}

// startTargets starts the mock, the bare proxy, toolgate and (when
// nginxBin is set) nginx, and returns the targets in their base order with
// every child started so far, for the caller to stop, even on error.
func startTargets(ctx context.Context, o options, tmp, bin, nginxBin string) ([]target, []*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	life := (o.maxRuntime + time.Minute).String()
	var children []*child
	mock, err := startChild("mock", filepath.Join(tmp, "mock.log"), true, self, "-mock", "-lifetime", life)
	if err != nil {
		return nil, children, err
	}
	children = append(children, mock)
	mockURL := "http://" + mock.addr
	bare, err := startChild("bare", filepath.Join(tmp, "bare.log"), true, self, "-bare", mockURL, "-lifetime", life)
	if err != nil {
		return nil, children, err
	}
	children = append(children, bare)
	gate, gateAddr, err := startToolgate(ctx, bin, tmp, mockURL, o)
	if gate != nil {
		children = append(children, gate)
	}
	if err != nil {
		return nil, children, err
	}
	targets := []target{
		{Name: "direct", URL: mockURL, procs: map[string]*child{"mock": mock}},
		{Name: "bare", URL: "http://" + bare.addr, procs: map[string]*child{"proxy": bare, "mock": mock}},
		{Name: "toolgate", URL: "http://" + gateAddr, procs: map[string]*child{"proxy": gate, "mock": mock}},
	}
	if nginxBin != "" {
		ng, addr, err := startNginx(ctx, nginxBin, tmp, mock.addr)
		if ng != nil {
			children = append(children, ng)
		}
		if err != nil {
			return nil, children, err
		}
		targets = append(targets, target{Name: "nginx", URL: "http://" + addr, procs: map[string]*child{"proxy": ng, "mock": mock}})
	}
	return targets, children, nil
}

// checkAndWarm makes every target answer each workload the scenarios use
// correctly once, plain and streamed, before any timing, then warms each
// target up at c=32.
func checkAndWarm(ctx context.Context, d *driver, targets []target, scs []scenario, warmup time.Duration, tmp string) error {
	used := map[string]bool{}
	var wls []string
	for _, sc := range scs {
		if w := sc.workload().name; !used[w] {
			used[w] = true
			wls = append(wls, w)
		}
	}
	for _, t := range targets {
		for _, sc := range scs {
			if sc.MCP == "" {
				continue
			}
			var w mcpWorker
			if s := w.one(ctx, d, t.URL, sc); s.out != okExact {
				return fmt.Errorf("%s: a single %s tools/call failed its check (outcome %d); logs in %s", t.Name, sc.Name, s.out, tmp)
			}
		}
		for _, wl := range wls {
			for _, stream := range []bool{false, true} {
				if s := d.one(ctx, t.URL, scenario{Stream: stream, Workload: wl}, time.Now()); s.out != okExact {
					return fmt.Errorf("%s: a single %s %s request failed its check (outcome %d); logs in %s", t.Name, wl,
						map[bool]string{false: "plain", true: "stream"}[stream], s.out, tmp)
				}
			}
		}
	}
	if warmup <= 0 {
		return nil
	}
	fmt.Print("warming up")
	for _, t := range targets {
		for _, wl := range wls {
			d.closedLoop(ctx, t.URL, scenario{Conc: 32, Workload: wl}, warmup)
			d.closedLoop(ctx, t.URL, scenario{Conc: 32, Stream: true, Workload: wl}, warmup)
		}
		for _, sc := range scs {
			if sc.MCP != "" {
				d.closedLoop(ctx, t.URL, sc, warmup)
			}
		}
		fmt.Print(".")
	}
	fmt.Println()
	return nil
}

// measure runs one scenario on one target and reads the servers' CPU time
// around it.
func measure(ctx context.Context, d *driver, t target, sc scenario, dur time.Duration) runResult {
	res := runResult{Target: t.Name, Scenario: sc.Name, LoadAvg: loadAvg(), CPUus: map[string]float64{}}
	before := map[string]float64{}
	for role, c := range t.procs {
		before[role], _ = c.cpu()
	}
	selfBefore, _ := cpuMicros(os.Getpid())
	connsBefore, _ := d.mockConns(ctx)
	var ss []sample
	var elapsed time.Duration
	if sc.Rate > 0 {
		ss, elapsed, res.Dropped = d.openLoop(ctx, t.URL, sc, dur)
	} else {
		ss, elapsed = d.closedLoop(ctx, t.URL, sc, dur)
	}
	summarize(&res, ss, elapsed)
	n := float64(max(res.Requests, 1))
	for role, c := range t.procs {
		after, _ := c.cpu()
		res.CPUus[role] = (after - before[role]) / n
	}
	selfAfter, _ := cpuMicros(os.Getpid())
	res.ClientCPU = (selfAfter - selfBefore) / n
	if connsAfter, err := d.mockConns(ctx); err == nil {
		res.UpstreamConnsPer1k = float64(connsAfter-connsBefore) * 1000 / n
	}
	return res
}

// startToolgate writes a config for the mock and runs toolgate serve on it,
// waiting until /readyz says the config is loaded.
func startToolgate(ctx context.Context, bin, dir, mockURL string, o options) (*child, string, error) {
	listen, err := proc.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	admin, err := proc.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	cfg, err := toolgateConfig(listen, admin, mockURL, o.logLevel)
	if err != nil {
		return nil, "", err
	}
	if o.traceRatio >= 0 {
		col, err := startCollector()
		if err != nil {
			return nil, "", err
		}
		runCollector = col
		cfg += tracingYAML(col.addr, o.traceRatio)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, "", err
	}
	args := []string{"serve", "--config", path}
	if o.profile != "" {
		// The profiled toolgate is this program (see profiled.go): the
		// same server, wiring and logger, built with the profiler.
		if bin, err = os.Executable(); err != nil {
			return nil, "", err
		}
		args = []string{"-profiled-toolgate", path, "-profile", o.profile}
	}
	c, err := startChild("toolgate", filepath.Join(dir, "toolgate.log"), false, bin, args...)
	if err != nil {
		return nil, "", err
	}
	if err := proc.WaitReady(ctx, "http://"+admin+"/readyz", c.done); err != nil {
		return c, "", fmt.Errorf("toolgate %w (log %s)\n%s", err, c.log, tail(c.log, 2000))
	}
	return c, listen, nil
}

// toolgateConfig is toolgate's config for the run: the mock as upstream and
// a catalog holding both workloads' tools.
func toolgateConfig(listen, admin, mockURL, logLevel string) (string, error) {
	fixtureTools, err := fixtureCatalog()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("listen: %s\nadmin_listen: %s\nupstreams:\n  - name: mock\n    url: %s\n%s%s%slog:\n  level: %s\n  format: json\n",
		listen, admin, mockURL, mcpServersYAML(mockURL), catalogYAML, fixtureTools, logLevel), nil
}
