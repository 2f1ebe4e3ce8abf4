// Command rss measures toolgate's memory while it holds many streamed tool
// calls at once: the case where a proxy that buffers is most expensive.
//
// Run it from anywhere inside the module:
//
//	go run ./test/rss                     # 1,000 concurrent streams
//	go run ./test/rss -streams 10000      # the 10,000-stream check (opt-in)
//
// The scripted upstream speaks TLS with HTTP/2, as the model providers do
// (-upstream h1 makes it plain HTTP/1.1): toolgate's ordinary upstream
// transport negotiates h2 and multiplexes the held streams over a few
// connections, trusting the upstream's self-signed certificate through
// SSL_CERT_FILE. Each stream then costs one descriptor in this program
// (the client's connection; two with -upstream h1) and one in toolgate
// (its inbound one), so the soft RLIMIT_NOFILE of this program is raised
// to the hard one (setrlimit), and toolgate inherits it; when the hard
// limit is below what -streams needs and cannot be raised, the run stops
// at once and says so. -max-rss-mib fails the run when toolgate's peak RSS
// is above it.
//
// It builds cmd/toolgate into a temporary folder and runs it as its own
// process, so the numbers are toolgate's alone (read from
// /proc/<pid>/status: VmHWM is the peak resident set, VmRSS the current
// one). The upstream answers every request with a text delta, then the
// first chunk of a tool call, and then stays silent, so toolgate passes
// the text on and holds the call. Once every client has its text and the
// upstream has sent every call start, all streams are open and held; the
// memory is read then, the upstream is released, and every client must
// end with the complete, valid call and [DONE]. With h2 every request must
// have reached the upstream over HTTP/2. Linux only; bounded by -timeout.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/test/internal/proc"
)

func main() {
	if os.Getenv(bareEnv) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := serveBare(ctx, os.Args[1:])
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	streams := flag.Int("streams", 1000, "concurrent streaming requests")
	timeout := flag.Duration("timeout", 0, "bound on the whole run (0: 60 s, plus 30 s per 1,000 streams over 1,000)")
	maxRSS := flag.Float64("max-rss-mib", 0, "fail when toolgate's peak RSS (VmHWM) is above this many MiB (0: report only)")
	bin := flag.String("toolgate", "", "use this toolgate binary instead of building one")
	opening := flag.Int("opening", 256, "most streams being opened at once (sent, text not yet back); 0: all at once")
	memLimit := flag.String("gomemlimit", "", "GOMEMLIMIT for toolgate only, as a deployment sets it (e.g. 360MiB; empty: none)")
	proto := flag.String("upstream", "h2", `how the scripted upstream speaks: "h2" (TLS with HTTP/2, as providers do) or "h1" (plain HTTP/1.1)`)
	bare := flag.Bool("bare", false, "hold the streams in a bare httputil.ReverseProxy instead of toolgate: the floor of any proxy on net/http")
	flag.Parse()
	if *bare {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "rss:", err)
			os.Exit(1)
		}
		*bin = self
		// The child inherits the environment, and serves the bare proxy.
		os.Setenv(bareEnv, "1")
	}
	if *streams < 1 {
		fmt.Fprintln(os.Stderr, "rss: -streams must be ≥ 1")
		os.Exit(2)
	}
	if *proto != "h2" && *proto != "h1" {
		fmt.Fprintln(os.Stderr, `rss: -upstream must be "h2" or "h1"`)
		os.Exit(2)
	}
	if *timeout <= 0 {
		*timeout = 60*time.Second + time.Duration(max(*streams-1000, 0))*30*time.Millisecond
	}
	if err := raiseFileLimit(*streams, fdsPerStream(*proto == "h2")); err != nil {
		fmt.Fprintln(os.Stderr, "rss:", err)
		os.Exit(1)
	}
	if err := run(*bin, *memLimit, *streams, *opening, *timeout, *maxRSS, *proto == "h2"); err != nil {
		fmt.Fprintln(os.Stderr, "rss:", err)
		os.Exit(1)
	}
}

const request = `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},` +
	`"messages":[{"role":"user","content":"Weather in Boston, MA?"}],` +
	`"tools":[{"type":"function","function":{"name":"get_current_weather","description":"Get the current weather in a given location",` +
	`"parameters":{"type":"object","properties":{"location":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}}}]}`

func chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `data: {"id":"chatcmpl-rss","object":"chat.completion.chunk","created":1741569970,"model":"gpt-4o","choices":[{"index":0,"delta":` +
		delta + `,"logprobs":null,"finish_reason":` + f + `}],"usage":null}` + "\n\n"
}

var (
	// head reaches the client at once; callStart makes toolgate hold.
	head      = chunk(`{"role":"assistant","content":"Checking the weather. "}`, "")
	callStart = chunk(`{"tool_calls":[{"index":0,"id":"call_rss","type":"function","function":{"name":"get_current_weather","arguments":""}}]}`, "")
	rest      = chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\":\"Bos"}}]}`, "") +
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ton, MA\",\"unit\":\"celsius\"}"}}]}`, "") +
		chunk(`{}`, "tool_calls") +
		`data: {"id":"chatcmpl-rss","object":"chat.completion.chunk","created":1741569970,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":20,"total_tokens":60}}` + "\n\n" +
		"data: [DONE]\n\n"
)

// upstream is the scripted model: it counts the streams it holds open and
// finishes them all when release is closed.
type upstream struct {
	held    atomic.Int64
	release chan struct{}
	// notH2 counts requests that did not arrive over HTTP/2.
	notH2 atomic.Int64
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 {
		u.notH2.Add(1)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	for _, s := range []string{head, callStart} {
		if _, err := io.WriteString(w, s); err != nil {
			return
		}
		_ = rc.Flush()
	}
	u.held.Add(1)
	select {
	case <-u.release:
	case <-r.Context().Done():
		return
	}
	_, _ = io.WriteString(w, rest)
}

// goroutines reads go_goroutines from the proxy's admin /metrics, with
// what their stacks and the heap hold, where memory goes while streams are
// held.
func goroutines(admin string) string {
	m, err := proc.Scrape(admin, "go_goroutines", "go_memstats_stack_inuse_bytes", "go_memstats_heap_inuse_bytes")
	if err != nil {
		return "?"
	}
	out := "?"
	if v, ok := m["go_goroutines"]; ok {
		out = strconv.FormatFloat(v, 'f', -1, 64)
	}
	if v, ok := m["go_memstats_stack_inuse_bytes"]; ok {
		out += fmt.Sprintf(" (stacks %.1f MiB", v/(1<<20))
		if h, ok := m["go_memstats_heap_inuse_bytes"]; ok {
			out += fmt.Sprintf(", heap in use %.1f MiB", h/(1<<20))
		}
		out += ")"
	}
	return out
}

func mib(kb int64) string { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }

// fdsPerStream is how many descriptors one held stream costs the process
// that holds the most of them. This program has the client's connection
// and, over HTTP/1.1, the upstream's accepted one too; over h2 the
// upstream's streams share a few connections. toolgate has its inbound
// connection (and over HTTP/1.1 its outbound one), never more than this
// program.
func fdsPerStream(h2 bool) int {
	if h2 {
		return 1
	}
	return 2
}

// fdSpare covers everything else: listeners, the runtime, files, logs and
// the few multiplexed upstream connections.
const fdSpare = 512

// raiseFileLimit sets the soft RLIMIT_NOFILE to the hard one, and the hard
// one too when it is below what n streams need and this process may raise
// it (root, or CAP_SYS_RESOURCE). Setting it explicitly also makes os/exec
// hand the raised limit to toolgate instead of the limit this program
// started with.
func raiseFileLimit(n, perStream int) error {
	need := uint64(n*perStream + fdSpare)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	if lim.Max >= need {
		lim.Cur = lim.Max
		return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	want := syscall.Rlimit{Cur: need, Max: need}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return fmt.Errorf("%d streams need %d open files in this program and in toolgate, but the hard RLIMIT_NOFILE is %d "+
			"and raising it failed (%v): raise it (ulimit -Hn %d as root, LimitNOFILE= in a systemd unit, --ulimit nofile=%d:%d "+
			"for a container) or ask for fewer -streams", n, need, lim.Max, err, need, need, need)
	}
	return nil
}

// startUpstream serves up on a loopback port: TLS with HTTP/2 when h2
// (its certificate's PEM at the returned path), else plain HTTP/1.1. It
// returns the URL toolgate's config names; conns counts the connections
// accepted and open those open now.
func startUpstream(up *upstream, dir string, h2 bool, conns, open *atomic.Int64) (*http.Server, string, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", "", err
	}
	srv := &http.Server{Handler: up, ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				conns.Add(1)
				open.Add(1)
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		}}
	if !h2 {
		go func() { _ = srv.Serve(ln) }()
		return srv, "http://" + ln.Addr().String(), "", nil
	}
	cert, caPath, err := loopbackCert(dir)
	if err != nil {
		ln.Close()
		return nil, "", "", err
	}
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	// 1,000 streams per connection: 10,000 held calls take about ten
	// upstream connections, as a provider's would (the default, 250,
	// works too, with four times as many).
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1000}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return srv, "https://" + ln.Addr().String(), caPath, nil
}

func run(bin, memLimit string, n, opening int, timeout time.Duration, maxRSS float64, h2 bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dir, bin, cleanup, err := proc.Workdir(ctx, "toolgate-rss-", false, bin)
	if err != nil {
		return err
	}
	defer cleanup()

	up := &upstream{release: make(chan struct{})}
	var upConns, upOpen atomic.Int64
	upSrv, upURL, caPath, err := startUpstream(up, dir, h2, &upConns, &upOpen)
	if err != nil {
		return err
	}
	defer upSrv.Close()
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(up.release) }) }
	defer release()

	listen, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	admin, err := proc.FreeAddr()
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf("listen: %s\nadmin_listen: %s\nlog:\n  level: warn\nupstreams:\n  - name: scripted\n    url: %s\n",
		listen, admin, upURL)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	gate := exec.Command(bin, "serve", "--config", cfgPath)
	gate.Env = os.Environ()
	if caPath != "" {
		gate.Env = append(gate.Env, "SSL_CERT_FILE="+caPath)
	}
	if memLimit != "" {
		gate.Env = append(gate.Env, "GOMEMLIMIT="+memLimit)
	}
	var gateLog bytes.Buffer
	gate.Stderr = &gateLog
	proc.SetParentDeathSignal(gate)
	if err := gate.Start(); err != nil {
		return err
	}
	pid := gate.Process.Pid
	exited := make(chan struct{})
	go func() { _ = gate.Wait(); close(exited) }()
	defer func() {
		_ = gate.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = gate.Process.Kill()
		}
	}()
	if err := proc.WaitReady(ctx, "http://"+admin+"/readyz", exited); err != nil {
		return fmt.Errorf("toolgate %w; it said: %s", err, gateLog.String())
	}
	idle, err := proc.Status(pid)
	if err != nil {
		return err
	}

	client := &http.Client{Transport: &http.Transport{
		MaxConnsPerHost:     0, // no cap: every stream its own connection
		MaxIdleConns:        n,
		MaxIdleConnsPerHost: n,
		DisableCompression:  true,
	}}
	var opened, finished, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	slots := make(chan struct{}, max(opening, 1))
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release := func() {}
			if opening > 0 {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					failed.Add(1)
					firstErr.CompareAndSwap(nil, ctx.Err().Error())
					return
				}
				var once sync.Once
				release = func() { once.Do(func() { <-slots }) }
			}
			defer release()
			err := stream(ctx, client, listen, func() { opened.Add(1); release() })
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			finished.Add(1)
		}()
	}

	// All open: every client has its text and the upstream has sent every
	// call start, so toolgate holds n calls.
	for opened.Load() < int64(n) || up.held.Load() < int64(n) {
		if failed.Load() > 0 {
			release()
			wg.Wait()
			return fmt.Errorf("%d of %d streams failed while opening (%d opened); first error: %v", failed.Load(), n, opened.Load(), firstErr.Load())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d streams opened (%d held upstream) before the timeout", opened.Load(), n, up.held.Load())
		case <-time.After(20 * time.Millisecond):
		}
	}
	openedIn := time.Since(start)
	time.Sleep(500 * time.Millisecond) // let the held state settle
	held, err := proc.Status(pid)
	if err != nil {
		return err
	}
	g := goroutines(admin)
	openUp := upOpen.Load()

	release()
	wg.Wait()
	gAfter := goroutines(admin)
	after, err := proc.Status(pid)
	if err != nil {
		return err
	}
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	ramp := "all opened at once"
	if opening > 0 {
		ramp = fmt.Sprintf("at most %d opening at a time", opening)
	}
	limit := "no GOMEMLIMIT"
	if memLimit != "" {
		limit = "GOMEMLIMIT " + memLimit
	}
	name := "toolgate"
	if os.Getenv(bareEnv) != "" {
		name = "bare httputil.ReverseProxy"
	}
	fmt.Printf("%s (pid %d), %d concurrent streaming chat requests, each holding a tool call (%s; RLIMIT_NOFILE %d, %s)\n", name, pid, n, ramp, lim.Cur, limit)
	fmt.Printf("  idle before streams:  VmRSS %s, VmHWM %s, threads %d\n", mib(idle["VmRSS"]), mib(idle["VmHWM"]), idle["Threads"])
	fmt.Printf("  all %d held (open in %v): VmRSS %s, VmHWM %s, threads %d, goroutines %s\n",
		n, openedIn.Round(time.Millisecond), mib(held["VmRSS"]), mib(held["VmHWM"]), held["Threads"], g)
	fmt.Printf("  after all completed:  VmRSS %s, peak VmHWM %s, goroutines %s\n", mib(after["VmRSS"]), mib(after["VmHWM"]), gAfter)
	fmt.Printf("  per held stream (VmHWM - idle VmRSS) / n: %.1f KiB\n", float64(after["VmHWM"]-idle["VmRSS"])/float64(n))
	fmt.Printf("  errors: %d of %d streams\n", failed.Load(), n)
	if failed.Load() > 0 || finished.Load() != int64(n) {
		return fmt.Errorf("%d of %d streams did not end with the valid call and [DONE]; first: %v", failed.Load(), n, firstErr.Load())
	}
	proto := "HTTP/1.1"
	if h2 {
		proto = "TLS, HTTP/2"
		if k := up.notH2.Load(); k > 0 {
			return fmt.Errorf("%d of %d upstream requests did not arrive over HTTP/2", k, n)
		}
	}
	fmt.Printf("  upstream (%s): %d connections open while all were held, %d accepted in all\n", proto, openUp, upConns.Load())

	fmt.Printf("  all %d streams ended with the valid call and [DONE]\n", n)
	if peak := float64(after["VmHWM"]) / 1024; maxRSS > 0 && peak > maxRSS {
		return fmt.Errorf("peak RSS %.1f MiB is above -max-rss-mib %.0f", peak, maxRSS)
	}
	return nil
}

// stream makes one request, reports it open once the text has arrived
// (before the upstream has finished), and checks the whole answer.
func stream(ctx context.Context, client *http.Client, addr string, onOpen func()) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(request))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-rss")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	first, err := nextEvent(br)
	if err != nil || first != head {
		return fmt.Errorf("first event %q (%v), want the text delta", first, err)
	}
	onOpen()
	var tail strings.Builder
	for {
		ev, err := nextEvent(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		tail.WriteString(ev)
	}
	if tail.String() != callStart+rest {
		return fmt.Errorf("held part differs from the upstream's: %q", tail.String())
	}
	return nil
}

// nextEvent reads one SSE event with its blank line, skipping comment
// events: toolgate writes ": keepalive" while it holds a call, which every
// SSE client ignores.
func nextEvent(br *bufio.Reader) (string, error) {
	for {
		var ev strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if err == io.EOF && (ev.Len() > 0 || line != "") {
					err = io.ErrUnexpectedEOF
				}
				return ev.String() + line, err
			}
			ev.WriteString(line)
			if line == "\n" {
				break
			}
		}
		if !strings.HasPrefix(ev.String(), ":") {
			return ev.String(), nil
		}
	}
}
