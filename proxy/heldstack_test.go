package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy"
)

// heldStackEnv makes the test binary, run again, the child that holds a
// stream and dumps its goroutines.
const heldStackEnv = "TOOLGATE_HELD_STACK_CHILD"

// The runtime halves a goroutine's stack at a collection only when less
// than a quarter of it is in use, counting 800 bytes it keeps spare below
// the frames. Answering takes a handler's stack to 16 KiB (writing the
// headers, judging), so a held stream's stack comes back to 8 KiB only if
// it waits under less than 4096 - 800 bytes of frames.
const heldFrameBudget = 16<<10/4 - 800

var frameSizes = regexp.MustCompile(`fp=0x([0-9a-f]+) sp=0x([0-9a-f]+)`)

// TestHeldStreamStackShrinks holds a stream in a child process and reads,
// from the traceback it dumps, how deep the handler waits: ten thousand
// held streams took 75 MiB more of stacks than a bare reverse proxy when
// it waited deeper.
func TestHeldStreamStackShrinks(t *testing.T) {
	if os.Getenv(heldStackEnv) == "1" {
		holdAndDump(t)
		return
	}
	if raceEnabled {
		t.Skip("the race detector's instrumentation changes the frames; the budget is for the build that is shipped")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHeldStreamStackShrinks$", "-test.count=1")
	cmd.Env = append(os.Environ(), heldStackEnv+"=1", "GOTRACEBACK=system")
	out, _ := cmd.CombinedOutput()
	depth, frames := heldDepth(string(out))
	if depth == 0 {
		t.Fatalf("no held handler in the child's traceback:\n%.3000s", out)
	}
	if depth >= heldFrameBudget {
		t.Errorf("a held stream waits under %d bytes of frames, over the %d that let its stack shrink:\n%s", depth, heldFrameBudget, frames)
	}
	t.Logf("a held stream waits under %d bytes of frames (budget %d):\n%s", depth, heldFrameBudget, frames)
}

// heldDepth finds the goroutine waiting in the stream reader and returns
// how many bytes of frames it waits under, and the frames.
func heldDepth(dump string) (int, string) {
	for _, g := range strings.Split(dump, "\ngoroutine ") {
		if !strings.Contains(g, "(*streamRun).read(") {
			continue
		}
		lo, hi := uint64(1<<63), uint64(0)
		var frames strings.Builder
		lines := strings.Split(g, "\n")
		for i, l := range lines {
			m := frameSizes.FindStringSubmatch(l)
			if m == nil || i == 0 {
				continue
			}
			fp, _ := strconv.ParseUint(m[1], 16, 64)
			sp, _ := strconv.ParseUint(m[2], 16, 64)
			lo, hi = min(lo, sp), max(hi, fp)
			name := strings.TrimSpace(lines[i-1])
			if k := strings.LastIndex(name, "("); k > 0 {
				name = name[:k]
			}
			frames.WriteString(strconv.FormatUint(fp-sp, 10) + "\t" + name + "\n")
		}
		if hi > lo {
			return int(hi - lo), frames.String()
		}
	}
	return 0, ""
}

// holdAndDump serves one stream whose upstream sends a call's start and
// then waits, and once toolgate waits for the rest, dumps every goroutine
// with its frames' places (GOTRACEBACK=system) and exits.
func holdAndDump(t *testing.T) {
	sent := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}`+"\n\n")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_current_weather","arguments":""}}]},"finish_reason":null}]}`+"\n\n")
		http.NewResponseController(w).Flush()
		close(sent)
		<-r.Context().Done()
	}))
	cfg, err := catalog.Parse([]byte("upstreams:\n  - name: mock\n    url: "+upstream.URL+"\n"+benchCatalogYAML), "held.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Options{Store: catalog.NewStore(snap), Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	gate := httptest.NewServer(srv)
	body := []byte(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"weather?"}],` +
		`"tools":[{"type":"function","function":{"name":"get_current_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}}}}}]}`)
	go func() {
		resp, err := http.Post(gate.URL+benchPath, "application/json", bytes.NewReader(body))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
		}
	}()
	<-sent
	// The call's start is held and the handler back in the reader.
	time.Sleep(300 * time.Millisecond)
	_ = syscall.Kill(os.Getpid(), syscall.SIGQUIT)
	time.Sleep(5 * time.Second)
	t.Fatal("SIGQUIT did not end the process")
}
