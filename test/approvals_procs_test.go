package test

// Approvals across two toolgate processes of the built binary, sharing a
// real redis-server: what TestApprovalsReplicasShareRedis shows in one
// process, with nothing in common between the replicas but redis.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/test/internal/proc"
)

// gateProc is one `toolgate serve` process, its output in a log file.
type gateProc struct {
	t           *testing.T
	name        string
	proxy       string // host:port of the proxy listener
	admin       string // host:port of the admin listener
	log         string
	cmd         *exec.Cmd
	done        chan struct{} // closed once the process has been waited for
	stoppedOnce sync.Once
}

// buildToolgate compiles cmd/toolgate into the test's temporary folder.
func buildToolgate(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "toolgate")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := proc.Build(ctx, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startGateProc starts bin with the config cfg makes for the listen and
// admin addresses, and waits for its /readyz. The ports are picked free
// before the start, so another process may take one first: toolgate then
// exits, and it is tried again on new ports.
func startGateProc(t *testing.T, bin, name string, cfg func(listen, admin string) string) *gateProc {
	t.Helper()
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		listen, err := proc.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		admin, err := proc.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "toolgate.yaml")
		if err := os.WriteFile(path, []byte(cfg(listen, admin)), 0o600); err != nil {
			t.Fatal(err)
		}
		g := &gateProc{t: t, name: name, proxy: listen, admin: admin, log: filepath.Join(dir, fmt.Sprintf("toolgate-%d.log", attempt))}
		g.start(bin, path)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = proc.WaitReady(ctx, "http://"+admin+"/readyz", g.done)
		cancel()
		if err == nil {
			return g
		}
		g.stop()
		if errors.Is(err, proc.ErrExited) && strings.Contains(g.output(), "address already in use") && attempt < 3 {
			continue
		}
		t.Fatalf("toolgate %s: %v\n%s", name, err, g.output())
	}
}

func (g *gateProc) start(bin, cfgPath string) {
	g.t.Helper()
	lf, err := os.Create(g.log)
	if err != nil {
		g.t.Fatal(err)
	}
	defer lf.Close() // the child has its own descriptor
	g.cmd = exec.Command(bin, "serve", "--config", cfgPath)
	g.cmd.Stdout, g.cmd.Stderr = lf, lf
	// Should the test binary die without its cleanups (a timeout's
	// panic), the kernel ends the process.
	proc.SetParentDeathSignal(g.cmd)
	if err := g.cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	g.done = make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	g.t.Cleanup(g.stop)
}

// stop ends this process by its PID: SIGTERM, then SIGKILL if it has not
// exited within 10 s.
func (g *gateProc) stop() {
	g.stoppedOnce.Do(func() {
		_ = g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.done:
		case <-time.After(10 * time.Second):
			g.t.Errorf("toolgate %s (pid %d) ignored SIGTERM; killing it", g.name, g.cmd.Process.Pid)
			_ = g.cmd.Process.Kill()
			<-g.done
		}
	})
}

func (g *gateProc) output() string {
	b, _ := os.ReadFile(g.log)
	return string(b)
}

func (g *gateProc) url() string { return "http://" + g.proxy }

// approve posts an operator's approval to this process's admin API.
func (g *gateProc) approve(id string) error {
	resp, err := http.Post("http://"+g.admin+"/approvals/"+id, "application/json",
		strings.NewReader(`{"decision":"approve","by":"ana@example.com"}`))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("approve at %s: %d %s", g.name, resp.StatusCode, b)
	}
	return nil
}

// chatAnswer is what a Chat request got back.
type chatAnswer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// errorCode is error.code of a Chat error envelope.
func (a chatAnswer) errorCode() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Code
}

// resumeChat sends chatRefundBody again with the approval id; safe to call
// from any goroutine.
func resumeChat(base, id string) chatAnswer {
	st, hdr, b, err := postRaw(base+"/v1/chat/completions", chatRefundBody, map[string]string{"X-Toolgate-Approval": id})
	return chatAnswer{status: st, header: hdr, body: b, err: err}
}

// raceResume resumes id at every gate at once.
func raceResume(id string, gates ...*gateProc) []chatAnswer {
	out := make([]chatAnswer, len(gates))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, g := range gates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = resumeChat(g.url(), id)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// checkRace wants exactly one release and one approval_used among the
// answers, and returns which gate released.
func checkRace(t *testing.T, round int, answers []chatAnswer) int {
	t.Helper()
	winner, used := -1, 0
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Fatalf("round %d: resume %d: %v", round, i, a.err)
		case a.status == http.StatusOK:
			if a.header.Get("X-Toolgate-Outcome") != "approved" || a.header.Get("X-Toolgate-Upstream-Calls") != "0" ||
				!strings.Contains(string(a.body), `"issue_refund"`) {
				t.Fatalf("round %d: release at %d: %v %s", round, i, a.header, a.body)
			}
			if winner >= 0 {
				t.Fatalf("round %d: released at both processes", round)
			}
			winner = i
		case a.status == http.StatusConflict && a.errorCode() == "approval_used":
			if strings.Contains(string(a.body), `"tool_calls"`) {
				t.Fatalf("round %d: a refusal carries the call: %s", round, a.body)
			}
			used++
		default:
			t.Fatalf("round %d: resume %d: %d %s", round, i, a.status, a.body)
		}
	}
	if winner < 0 || used != 1 {
		t.Fatalf("round %d: %d refused as used, released at %d; want one of each", round, used, winner)
	}
	return winner
}

// TestApprovalsProcessesShareRedis: two toolgate processes on one
// redis-server. Held at A, approved through B's admin API, resumed at A
// and B at once: released exactly once, 100 rounds over, with the
// upstream asked only for the holds. With redis gone, a resume at either
// process is a retryable 503 in Chat's envelope and releases nothing.
func TestApprovalsProcessesShareRedis(t *testing.T) {
	rd := startTestRedis(t)
	bin := buildToolgate(t)
	up := newRefundUpstream(t)
	cfg := func(listen, admin string) string {
		c := refundConfig(up.srv.URL, "  store: redis://"+rd.addr+"/0\n", 100000, "operator")
		c = strings.Replace(c, "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n",
			"listen: "+listen+"\nadmin_listen: "+admin+"\nlog:\n  level: warn\n", 1)
		return c
	}
	a := startGateProc(t, bin, "A", cfg)
	b := startGateProc(t, bin, "B", cfg)
	gates := []*gateProc{a, b}

	const rounds = 100
	began := time.Now()
	wins := make([]int, len(gates))
	for i := range rounds {
		id := rawHold(t, a.url())
		if err := b.approve(id); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		wins[checkRace(t, i, raceResume(id, gates...))]++
	}
	t.Logf("%d rounds in %s; released at A %d times, at B %d times", rounds, time.Since(began).Round(time.Millisecond), wins[0], wins[1])
	if n := up.n.Load(); n != rounds {
		t.Fatalf("%d upstream requests, want %d (the holds only)", n, rounds)
	}

	id := rawHold(t, a.url())
	if err := b.approve(id); err != nil {
		t.Fatal(err)
	}
	rd.stop()
	for _, g := range gates {
		r := resumeChat(g.url(), id)
		if r.err != nil {
			t.Fatalf("resume at %s with redis down: %v", g.name, r.err)
		}
		if r.status != http.StatusServiceUnavailable || r.errorCode() != "store_unavailable" ||
			r.header.Get("Retry-After") != "1" || r.header.Get("X-Should-Retry") == "false" {
			t.Errorf("resume at %s with redis down: %d %v %s", g.name, r.status, r.header, r.body)
		}
		if strings.Contains(string(r.body), "issue_refund") || r.header.Get("X-Toolgate-Outcome") == "approved" {
			t.Errorf("resume at %s with redis down released the call: %s", g.name, r.body)
		}
	}
	if n := up.n.Load(); n != rounds+1 {
		t.Errorf("%d upstream requests, want %d", n, rounds+1)
	}
}
