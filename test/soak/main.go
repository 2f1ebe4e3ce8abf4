// Command soak runs toolgate for a long time under steady, mixed traffic
// and reports whether anything drifts: errors, memory, goroutines. It is
// not part of `go test ./...` or `make test`; run it by hand:
//
//	go run ./test/soak                  # 10 minutes (the default)
//	go run ./test/soak -duration 2m     # shorter
//	go run ./test/soak -rate 80 -report 10s
//
// It builds cmd/toolgate from this checkout and runs it as its own process
// (so the memory and goroutine figures are toolgate's alone), in front of
// a scripted Chat Completions upstream served by this program on loopback.
// Traffic is an open loop at -rate requests per second, in a fixed cycle:
//
//	valid          a valid tool call, passed through unchanged
//	hallucinated   an invented tool, substituted after a decision re-query
//	bad-args       a schema violation, repaired by a reprompt
//	escalate       an invented tool the model gives up on: an expected 422
//	stream-valid   a streamed valid call, held and released
//	stream-invent  a streamed invented call, substituted
//
// Every answer is checked against what its scenario must produce; anything
// else is an unexpected error. Every -report interval (30 s) it prints
// requests served, errors, escalations, toolgate's resident memory (VmRSS
// from /proc/<pid>/status) and goroutines (go_goroutines from /metrics);
// at the end, a summary comparing the first and last samples. It exits 1
// on any unexpected error or if toolgate dies. Everything is bounded: the
// run stops after -duration (plus a minute to drain and stop), at most
// -concurrency requests are in flight, each has a 30 s timeout, and
// toolgate is killed if this program dies. Linux only for RSS (elsewhere
// it reports n/a).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/test/internal/proc"
)

type options struct {
	duration    time.Duration
	rate        float64
	concurrency int
	report      time.Duration
	modelDelay  time.Duration
	toolgate    string
	logLevel    string
	keep        bool
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "how long to send traffic")
	flag.Float64Var(&o.rate, "rate", 40, "requests per second (open loop)")
	flag.IntVar(&o.concurrency, "concurrency", 64, "most requests in flight; a tick that finds them all busy is counted as skipped")
	flag.DurationVar(&o.report, "report", 30*time.Second, "interval between progress reports")
	flag.DurationVar(&o.modelDelay, "model-delay", 20*time.Millisecond, "the scripted model's thinking time per answer")
	flag.StringVar(&o.toolgate, "toolgate", "", "use this toolgate binary instead of building one")
	flag.StringVar(&o.logLevel, "log-level", "warn", "toolgate's log.level (its log goes to a file in the temporary folder)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary folder (config, log, binary)")
	flag.Parse()
	if o.duration <= 0 || o.rate <= 0 || o.concurrency < 1 || o.report <= 0 {
		fmt.Fprintln(os.Stderr, "soak: -duration, -rate, -concurrency and -report must be positive")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.duration+2*time.Minute)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// ---- the scripted upstream ----

const (
	weatherArgs = `{"location":"Boston, MA","unit":"celsius"}`
	badArgs     = `{"location":"Boston, MA","unit":"kelvin"}`
	invented    = "fetch_weather_report"
)

const catalogYAML = `catalog:
  version: soak-v1
  tools:
    - name: get_current_weather
      description: Get the current weather in a given location
      parameters: {"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}
    - name: get_stock_price
      description: Fetch the latest price for a given ticker
      parameters: {"type":"object","properties":{"ticker":{"type":"string"},"exchange":{"type":"string"}},"required":["ticker","exchange"]}
`

func answer(id string, calls [][2]string, text string) []byte {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	finish := "tool_calls"
	if len(calls) == 0 {
		msg["content"], finish = text, "stop"
	} else {
		var tcs []any
		for i, c := range calls {
			tcs = append(tcs, map[string]any{"id": fmt.Sprintf("call_%s_%d", id, i), "type": "function",
				"function": map[string]any{"name": c[0], "arguments": c[1]}})
		}
		msg["tool_calls"] = tcs
	}
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-" + id, "object": "chat.completion", "created": 1741569952, "model": "gpt-4o",
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}})
	return b
}

func decision(d string) []byte { return answer("decision", nil, d) }

var (
	substituteDecision = `{"decision":"substitute","corrected_tool_call":{"tool_name":"get_current_weather","arguments":` + weatherArgs + `},"escalation":null,"confidence":0.93}`
	escalateDecision   = `{"decision":"escalate","corrected_tool_call":null,"escalation":{"reason":"no tool reads weather reports","original_intent":"a weather report","missing_capability":"weather reports"},"confidence":0.2}`
)

func chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"chatcmpl-soak","object":"chat.completion.chunk","created":1741569970,"model":"gpt-4o","choices":[{"index":0,"delta":` +
		delta + `,"logprobs":null,"finish_reason":` + f + `}]}` + "\n\n"
}

func streamEvents(name, args string) []string {
	evs := []string{chunk(`{"role":"assistant","content":""}`, "")}
	for _, w := range []string{"Let", " me", " check", " that."} {
		b, _ := json.Marshal(w)
		evs = append(evs, chunk(`{"content":`+string(b)+`}`, ""))
	}
	a1, _ := json.Marshal(args[:len(args)/2])
	a2, _ := json.Marshal(args[len(args)/2:])
	return append(evs,
		chunk(`{"tool_calls":[{"index":0,"id":"call_stream","type":"function","function":{"name":"`+name+`","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(a1)+`}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(a2)+`}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		`data: {"id":"chatcmpl-soak","object":"chat.completion.chunk","created":1741569970,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":20,"total_tokens":70}}`+"\n\n",
		"data: [DONE]\n\n")
}

// mock answers from the scenario named in the user's message; a request
// carrying a tool message is one of toolgate's re-queries.
func mock(delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		var req struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		scenario, _ := req.Messages[0].Content.(string)
		requery := slices.ContainsFunc(req.Messages, func(m struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		}) bool {
			return m.Role == "tool"
		})
		if !sleep(r.Context(), delay) {
			return
		}
		if req.Stream && !requery {
			name, args := "get_current_weather", weatherArgs
			if strings.Contains(scenario, "invent") {
				name, args = invented, `{"city":"Boston"}`
			}
			w.Header().Set("Content-Type", "text/event-stream")
			rc := http.NewResponseController(w)
			for _, ev := range streamEvents(name, args) {
				if _, err := io.WriteString(w, ev); err != nil || rc.Flush() != nil || !sleep(r.Context(), 3*time.Millisecond) {
					return
				}
			}
			return
		}
		var out []byte
		switch {
		case strings.Contains(scenario, "soak:valid"):
			out = answer("valid", [][2]string{{"get_current_weather", weatherArgs}}, "")
		case strings.Contains(scenario, "soak:invent") && requery:
			out = decision(substituteDecision)
		case strings.Contains(scenario, "soak:escalate") && requery:
			out = decision(escalateDecision)
		case strings.Contains(scenario, "soak:invent"), strings.Contains(scenario, "soak:escalate"):
			out = answer("invent", [][2]string{{invented, `{"city":"Boston"}`}}, "")
		case strings.Contains(scenario, "soak:badargs") && requery:
			out = answer("fixed", [][2]string{{"get_current_weather", weatherArgs}}, "")
		case strings.Contains(scenario, "soak:badargs"):
			out = answer("bad", [][2]string{{"get_current_weather", badArgs}}, "")
		default:
			http.Error(w, `{"error":{"message":"unknown scenario","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		_, _ = w.Write(out)
	})
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ---- scenarios ----

type scenario struct {
	name   string
	stream bool
	check  func(status int, h http.Header, body []byte) error
}

func outcome(want string) func(int, http.Header, []byte) error {
	return func(status int, h http.Header, body []byte) error {
		if status != 200 {
			return fmt.Errorf("status %d", status)
		}
		if got := h.Get("X-Toolgate-Outcome"); got != want {
			return fmt.Errorf("outcome %q, want %q", got, want)
		}
		var a struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &a); err != nil || len(a.Choices) != 1 || len(a.Choices[0].Message.ToolCalls) != 1 {
			return fmt.Errorf("answer %.200s", body)
		}
		if f := a.Choices[0].Message.ToolCalls[0].Function; f.Name != "get_current_weather" || f.Arguments != weatherArgs {
			return fmt.Errorf("call %s(%s)", f.Name, f.Arguments)
		}
		return nil
	}
}

func escalation(status int, h http.Header, body []byte) error {
	if status != 422 || !bytes.Contains(body, []byte(`"tool_call_escalation"`)) || h.Get("X-Toolgate-Escalation-Id") == "" {
		return fmt.Errorf("status %d body %.200s, want an escalation", status, body)
	}
	return nil
}

// streamed checks a stream the way an SDK reads it: events until [DONE],
// no error event, and the assembled call.
func streamed(status int, _ http.Header, body []byte) error {
	if status != 200 {
		return fmt.Errorf("status %d", status)
	}
	var name, args string
	done := false
	for _, line := range strings.Split(string(body), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if d == "[DONE]" {
			done = true
			continue
		}
		var ch struct {
			Error   any `json:"error"`
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil || ch.Error != nil {
			return fmt.Errorf("event %.200s", d)
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				name += tc.Function.Name
				args += tc.Function.Arguments
			}
		}
	}
	if !done || name != "get_current_weather" {
		return fmt.Errorf("stream ended (done=%v) with call %q", done, name)
	}
	var v map[string]any
	if json.Unmarshal([]byte(args), &v) != nil || v["location"] != "Boston, MA" {
		return fmt.Errorf("streamed arguments %q", args)
	}
	return nil
}

// cycle is the traffic mix, repeated: 20 requests.
var cycle = func() []scenario {
	valid := scenario{"valid", false, outcome("pass")}
	invent := scenario{"hallucinated", false, outcome("substituted")}
	bad := scenario{"bad-args", false, outcome("reprompted")}
	esc := scenario{"escalate", false, escalation}
	sv := scenario{"stream-valid", true, streamed}
	si := scenario{"stream-invent", true, streamed}
	return []scenario{valid, invent, sv, bad, valid, si, valid, esc, sv, invent,
		valid, bad, si, valid, sv, invent, bad, valid, si, sv}
}()

func requestBody(sc scenario) []byte {
	marker := map[string]string{"valid": "soak:valid", "hallucinated": "soak:invent", "bad-args": "soak:badargs",
		"escalate": "soak:escalate", "stream-valid": "soak:valid", "stream-invent": "soak:invent"}[sc.name]
	req := map[string]any{
		"model":    "gpt-4o",
		"messages": []any{map[string]any{"role": "user", "content": marker + " What's the weather like in Boston today?"}},
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "get_current_weather", "description": "Get the current weather in a given location",
				"parameters": json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`)}},
			map[string]any{"type": "function", "function": map[string]any{"name": "get_stock_price", "description": "Fetch the latest price for a given ticker",
				"parameters": json.RawMessage(`{"type":"object","properties":{"ticker":{"type":"string"},"exchange":{"type":"string"}},"required":["ticker","exchange"]}`)}},
		},
		"tool_choice": "auto",
	}
	if sc.stream {
		req["stream"] = true
		req["stream_options"] = map[string]any{"include_usage": true}
	}
	b, _ := json.Marshal(req)
	return b
}

// ---- counters ----

type stats struct {
	mu          sync.Mutex
	served      int64
	escalations int64
	skipped     int64
	errs        map[string]int64
	examples    []string
	byScenario  map[string]int64
	latencies   []time.Duration // since the last report
}

func (s *stats) add(sc scenario, d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served++
	s.byScenario[sc.name]++
	s.latencies = append(s.latencies, d)
	if err != nil {
		key := sc.name
		s.errs[key]++
		if len(s.examples) < 10 {
			s.examples = append(s.examples, sc.name+": "+err.Error())
		}
		return
	}
	if sc.name == "escalate" {
		s.escalations++
	}
}

func (s *stats) errors() int64 {
	var n int64
	for _, v := range s.errs {
		n += v
	}
	return n
}

// ---- toolgate's process ----

type sample struct {
	at         time.Duration
	served     int64
	errors     int64
	escal      int64
	rssKiB     int64
	goroutines int64
}

// rssKiB reads VmRSS of pid, or -1 where /proc is not there.
func rssKiB(pid int) int64 {
	st, err := proc.Status(pid)
	if n, ok := st["VmRSS"]; err == nil && ok {
		return n
	}
	return -1
}

func run(ctx context.Context, o options) error {
	tmp, bin, cleanup, err := proc.Workdir(ctx, "toolgate-soak-", o.keep, o.toolgate)
	if err != nil {
		return err
	}
	defer cleanup()

	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	msrv := &http.Server{Handler: mock(o.modelDelay), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = msrv.Serve(mln) }()
	defer msrv.Close()

	listen, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	admin, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf("listen: %s\nadmin_listen: %s\nupstreams:\n  - name: mock\n    url: http://%s\n%slog:\n  level: %s\n  format: json\n",
		listen, admin, mln.Addr(), catalogYAML, o.logLevel)
	cfgPath := filepath.Join(tmp, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(tmp, "toolgate.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	proc.SetParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	// exitErr is set before exited closes.
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
		}
	}()
	pid := cmd.Process.Pid

	if err := proc.WaitReady(ctx, "http://"+admin+"/readyz", exited); err != nil {
		if errors.Is(err, proc.ErrExited) {
			err = fmt.Errorf("%w: %v", err, exitErr)
		}
		return fmt.Errorf("toolgate %w (log %s)", err, logPath)
	}

	idle := func() sample {
		m, _ := proc.Scrape(admin, "go_goroutines")
		return sample{rssKiB: rssKiB(pid), goroutines: int64(m["go_goroutines"])}
	}
	startIdle := idle()
	fmt.Printf("toolgate pid %d on %s (admin %s); upstream %s; %.0f req/s for %s, report every %s\n",
		pid, listen, admin, mln.Addr(), o.rate, o.duration, o.report)
	fmt.Printf("idle before load: rss %s, goroutines %d\n\n", mib(startIdle.rssKiB), startIdle.goroutines)
	fmt.Printf("%8s %9s %8s %7s %7s %11s %10s %8s %8s %8s\n", "elapsed", "served", "rate/s", "errors", "escal.", "rss", "goroutines", "p50", "p99", "skipped")

	st := &stats{errs: map[string]int64{}, byScenario: map[string]int64{}}
	tr := &http.Transport{MaxIdleConnsPerHost: o.concurrency, IdleConnTimeout: 30 * time.Second}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	bodies := map[string][]byte{}
	for _, sc := range cycle {
		bodies[sc.name] = requestBody(sc)
	}
	one := func(sc scenario) {
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+listen+"/v1/chat/completions", bytes.NewReader(bodies[sc.name]))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sk-soak")
		resp, err := client.Do(req)
		if err == nil {
			var body []byte
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				err = sc.check(resp.StatusCode, resp.Header, body)
			}
		}
		if ctx.Err() != nil {
			return // the run was interrupted; not toolgate's error
		}
		st.add(sc, time.Since(start), err)
	}

	sem := make(chan struct{}, o.concurrency)
	var wg sync.WaitGroup
	loadCtx, stopLoad := context.WithTimeout(ctx, o.duration)
	defer stopLoad()
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
	defer tick.Stop()
	report := time.NewTicker(o.report)
	defer report.Stop()
	began := time.Now()
	var samples []sample
	var died atomic.Bool
	var lastServed int64
	lastAt := began
	var i int
	takeSample := func() {
		st.mu.Lock()
		lat := st.latencies
		st.latencies = nil
		s := sample{at: time.Since(began), served: st.served, errors: st.errors(), escal: st.escalations}
		skipped := st.skipped
		st.mu.Unlock()
		m, err := proc.Scrape(admin, "go_goroutines")
		if err != nil {
			s.goroutines = -1
		} else {
			s.goroutines = int64(m["go_goroutines"])
		}
		s.rssKiB = rssKiB(pid)
		samples = append(samples, s)
		slices.Sort(lat)
		rate := float64(s.served-lastServed) / time.Since(lastAt).Seconds()
		lastServed, lastAt = s.served, time.Now()
		fmt.Printf("%8s %9d %8.1f %7d %7d %11s %10d %8s %8s %8d\n", s.at.Round(time.Second), s.served, rate, s.errors, s.escal,
			mib(s.rssKiB), s.goroutines, pct(lat, 50), pct(lat, 99), skipped)
	}
loop:
	for {
		select {
		case <-loadCtx.Done():
			break loop
		case <-exited:
			died.Store(true)
			fmt.Printf("toolgate exited during the run: %v (log %s)\n", exitErr, logPath)
			break loop
		case <-report.C:
			takeSample()
		case <-tick.C:
			select {
			case sem <- struct{}{}:
				sc := cycle[i%len(cycle)]
				i++
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					one(sc)
				}()
			default:
				st.mu.Lock()
				st.skipped++
				st.mu.Unlock()
			}
		}
	}
	wg.Wait()
	traffic := time.Since(began)
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errors.New("interrupted")
	}
	if died.Load() {
		return errors.New("toolgate died")
	}
	if len(samples) == 0 || samples[len(samples)-1].served != st.served {
		takeSample()
	}

	// Idle again: what is left once the traffic has stopped. The pools on
	// both sides of toolgate keep idle connections on purpose; closing
	// them shows what toolgate itself still holds.
	tr.CloseIdleConnections()
	msrv.SetKeepAlivesEnabled(false)
	time.Sleep(2 * time.Second)
	endIdle := idle()
	m, _ := proc.Scrape(admin, "toolgate_escalations_total", "toolgate_panics_total", "toolgate_requests_total", "toolgate_unvalidated_total")

	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		exitErr = errors.New("did not stop within 30 s of SIGTERM; killed")
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	fmt.Printf("\nsummary after %s of traffic\n", traffic.Round(time.Second))
	fmt.Printf("  requests served      %d (%.1f/s); skipped at the concurrency cap %d\n", st.served, float64(st.served)/traffic.Seconds(), st.skipped)
	var names []string
	for n := range st.byScenario {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Printf("    %-14s %7d  errors %d\n", n, st.byScenario[n], st.errs[n])
	}
	fmt.Printf("  unexpected errors    %d\n", st.errors())
	for _, e := range st.examples {
		fmt.Printf("    e.g. %s\n", e)
	}
	fmt.Printf("  escalations          %d expected 422s; toolgate_escalations_total %.0f\n", st.escalations, m["toolgate_escalations_total"])
	fmt.Printf("  toolgate counters    requests_total %.0f, panics_total %.0f, unvalidated_total %.0f\n",
		m["toolgate_requests_total"], m["toolgate_panics_total"], m["toolgate_unvalidated_total"])
	if len(samples) > 0 {
		first, last := samples[0], samples[len(samples)-1]
		lo, hi := first.rssKiB, first.rssKiB
		gmax := first.goroutines
		for _, s := range samples {
			lo, hi, gmax = min(lo, s.rssKiB), max(hi, s.rssKiB), max(gmax, s.goroutines)
		}
		growth := "n/a"
		if first.rssKiB > 0 {
			growth = fmt.Sprintf("%+.1f%%", 100*float64(last.rssKiB-first.rssKiB)/float64(first.rssKiB))
		}
		fmt.Printf("  rss                  idle %s before; first sample %s, last %s (%s), min %s, max %s; idle %s after\n",
			mib(startIdle.rssKiB), mib(first.rssKiB), mib(last.rssKiB), growth, mib(lo), mib(hi), mib(endIdle.rssKiB))
		fmt.Printf("  goroutines           idle %d before; under load first %d, last %d, max %d; idle %d after\n",
			startIdle.goroutines, first.goroutines, last.goroutines, gmax, endIdle.goroutines)
	}
	fmt.Printf("  toolgate exit        %v\n", exitStatus(exitErr))
	switch {
	case st.errors() > 0:
		return fmt.Errorf("%d unexpected errors", st.errors())
	case m["toolgate_panics_total"] > 0:
		return errors.New("toolgate recovered from panics")
	case exitErr != nil:
		return fmt.Errorf("toolgate did not stop cleanly: %v", exitErr)
	}
	return nil
}

func exitStatus(err error) string {
	if err == nil {
		return "clean (status 0 after SIGTERM)"
	}
	return err.Error()
}

func mib(kib int64) string {
	if kib < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", float64(kib)/1024)
}

func pct(sorted []time.Duration, p int) string {
	if len(sorted) == 0 {
		return "-"
	}
	return sorted[(len(sorted)-1)*p/100].Round(100 * time.Microsecond).String()
}
