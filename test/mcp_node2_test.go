package test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/test/internal/proc"
)

// TestMCPTypeScriptSDKv2 puts toolgate between the MCP TypeScript SDK v2's
// client (@modelcontextprotocol/client) and a stateless server of the same
// SDK (@modelcontextprotocol/server behind @modelcontextprotocol/node), in
// both protocol eras the client speaks: the 2025-11-25 initialize
// handshake (its default) and 2026-07-28, pinned. Through toolgate the
// client lists the tools, a valid call is answered by the server, and a
// call with arguments the tool's schema refuses and one a catalog rule
// refuses come back as error results without reaching the server; in
// 2026-07-28 a call held for confirmation runs once the person says yes
// and is refused when they say no.
func TestMCPTypeScriptSDKv2(t *testing.T) {
	node := needNodeIn(t, "node-mcp2", "@modelcontextprotocol/client", "@modelcontextprotocol/server", "@modelcontextprotocol/node")
	for _, era := range []string{"legacy", "2026-07-28"} {
		t.Run(era, func(t *testing.T) {
			srv := startTSv2Server(t, node)
			g := startGate(t, `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{url: http://127.0.0.1:9}]
mcp_servers:
  - {name: orders, url: `+srv.url+`, path_prefix: /mcp/orders}
catalog:
  tools:
    - name: orders/issue_refund
      rules:
        - expr: "args.amount_cents <= 100000"
          message: refunds above 1000.00 need a person
    - name: orders/cancel_order
      policy: confirm
`)
			// Directly, the server refuses the bad arguments itself and
			// runs the refund the catalog would refuse.
			direct, err := runTSv2Client(node, srv.url, era, false)
			if err != nil {
				t.Fatalf("directly: %v", err)
			}
			if direct.Valid.IsError || direct.Valid.Text != "ord_7: shipped" || !direct.Schema.IsError || direct.Rule.IsError ||
				(era != "legacy" && direct.Protocol != era) {
				t.Fatalf("directly, the client saw %+v", direct)
			}
			// In 2026-07-28 a call held for confirmation is asked about in
			// an input_required result, which the client fulfils by
			// itself from its elicitation handler.
			confirm := era != "legacy"
			got, err := runTSv2Client(node, g.URL+"/mcp/orders", era, confirm)
			ran := srv.stop()
			check := func(what string, ok bool) {
				t.Helper()
				if !ok {
					t.Errorf("%s: client saw %+v, server ran %v", what, got, ran)
				}
			}
			if err != nil {
				t.Error(err)
			} else {
				check("every tool listed", strings.Join(got.Tools, ",") == "cancel_order,issue_refund,lookup_order")
				check("the valid call answered by the server", !got.Valid.IsError && got.Valid.Text == "ord_7: shipped")
				check("bad arguments refused by toolgate", got.Schema.IsError && strings.Contains(got.Schema.Text, "/order_id"))
				check("a catalog rule's refusal", got.Rule.IsError && strings.Contains(got.Rule.Text, "refunds above 1000.00 need a person"))
				if era != "legacy" {
					check("the pinned revision negotiated", got.Protocol == era)
				}
				if confirm {
					check("the person asked about the held call", strings.Contains(got.Question, "cancel_order"))
					check("a confirmed call answered by the server", got.ConfirmYes != nil && !got.ConfirmYes.IsError && got.ConfirmYes.Text == "ord_9: cancelled")
					check("a declined call refused", got.ConfirmNo != nil && got.ConfirmNo.IsError && strings.Contains(got.ConfirmNo.Text, "declined"))
				}
			}
			// The direct run's lookup and refund, and through toolgate the
			// valid lookup and the confirmed cancellation: nothing toolgate
			// refused.
			want := "issue_refund,lookup_order,lookup_order"
			if confirm {
				want = "cancel_order," + want
			}
			slices.Sort(ran)
			check("only the calls toolgate let through reached the server", strings.Join(ran, ",") == want)
		})
	}
}

type tsv2Result struct {
	IsError bool   `json:"isError"`
	Text    string `json:"text"`
	Code    any    `json:"code"`
	Message string `json:"message"`
}

type tsv2Outcome struct {
	Server     string      `json:"server"`
	Protocol   string      `json:"protocol"`
	Tools      []string    `json:"tools"`
	Valid      tsv2Result  `json:"valid"`
	Schema     tsv2Result  `json:"schema"`
	Rule       tsv2Result  `json:"rule"`
	Question   string      `json:"question"`
	ConfirmYes *tsv2Result `json:"confirmYes"`
	ConfirmNo  *tsv2Result `json:"confirmNo"`
}

// runTSv2Client runs node-mcp2/client.mjs against url in era (with the
// confirmation calls when confirm) and reads what it saw; a client that
// failed returns its stderr as the error.
func runTSv2Client(node, url, era string, confirm bool) (tsv2Outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = "node-mcp2"
	cmd.Env = append(os.Environ(), "TOOLGATE_MCP_URL="+url, "TOOLGATE_MCP_ERA="+era)
	if confirm {
		cmd.Env = append(cmd.Env, "TOOLGATE_MCP_CONFIRM=1")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	proc.SetParentDeathSignal(cmd)
	var out tsv2Outcome
	if err := cmd.Run(); err != nil {
		return out, &clientError{err: err, stderr: stderr.String()}
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return out, &clientError{err: err, stderr: stdout.String()}
	}
	return out, nil
}

type clientError struct {
	err    error
	stderr string
}

func (e *clientError) Error() string {
	s := strings.TrimSpace(e.stderr)
	// Node prints the throwing line first; the error itself is the first
	// line that names one.
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "Error: ") {
			s = line
			break
		}
	}
	return "the client failed: " + e.err.Error() + ": " + s
}

// tsv2Server is node-mcp2/server.mjs running on a loopback port.
type tsv2Server struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	ran  []string
	once sync.Once
}

// startTSv2Server starts node-mcp2/server.mjs on a port the kernel picks
// and returns it once it has said where it serves; cleanup stops it by
// PID.
func startTSv2Server(t *testing.T, node string) *tsv2Server {
	t.Helper()
	script, err := filepath.Abs("node-mcp2/server.mjs")
	if err != nil {
		t.Fatal(err)
	}
	s := &tsv2Server{cmd: exec.Command(node, script), done: make(chan struct{})}
	s.cmd.Dir = "node-mcp2"
	s.cmd.Stderr = os.Stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	proc.SetParentDeathSignal(s.cmd)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if u, ok := strings.CutPrefix(line, "listening "); ok {
				urls <- u
				continue
			}
			var call struct {
				Ran string `json:"ran"`
			}
			if json.Unmarshal([]byte(line), &call) == nil && call.Ran != "" {
				s.mu.Lock()
				s.ran = append(s.ran, call.Ran)
				s.mu.Unlock()
			}
		}
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.stop() })
	select {
	case s.url = <-urls:
		return s
	case <-s.done:
		t.Fatal("the TypeScript SDK v2 server exited before it served")
	case <-time.After(20 * time.Second):
		t.Fatal("the TypeScript SDK v2 server did not say where it serves within 20s")
	}
	return nil
}

// stop ends the server by its PID and returns the tools it ran, in order.
func (s *tsv2Server) stop() []string {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ran...)
}
