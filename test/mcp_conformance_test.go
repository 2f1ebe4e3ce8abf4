package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// conformanceVersion is the suite version test/node-conformance pins.
const conformanceVersion = "0.1.13"

// TestMCPConformance runs the official MCP conformance suite's server
// scenarios (all of them, pending ones too) against the project's own
// conformance target (test/mcpconformance, written with the Go SDK),
// first directly and then through toolgate. Both runs must pass every
// check, and toolgate must not change a single check's status: every
// scenario passes, warns and informs the same way through the gate as
// without it.
func TestMCPConformance(t *testing.T) {
	node := needNodeIn(t, "node-conformance", "@modelcontextprotocol/conformance")
	target := startConformanceTarget(t)
	g := startGate(t, `upstreams: [{url: http://127.0.0.1:9}]
mcp_servers:
  - {name: conformance, url: `+target+`, path_prefix: /mcp/conformance}
`)
	direct := runConformance(t, node, target)
	gated := runConformance(t, node, g.URL+"/mcp/conformance")
	t.Logf("conformance %s, direct: %s", conformanceVersion, direct.summary())
	t.Logf("conformance %s, through toolgate: %s", conformanceVersion, gated.summary())
	for _, run := range []struct {
		name string
		res  conformanceResult
	}{{"direct", direct}, {"toolgate", gated}} {
		t.Run(run.name, func(t *testing.T) {
			for _, sc := range run.res.scenarios() {
				t.Run(sc, func(t *testing.T) {
					for _, c := range run.res[sc] {
						if c.Status == "FAILURE" {
							t.Errorf("%s: %s", c.ID, c.ErrorMessage)
						}
					}
				})
			}
		})
	}
	if d, g := direct.count("SUCCESS"), gated.count("SUCCESS"); d == 0 || d != g {
		t.Errorf("%d checks passed directly, %d through toolgate", d, g)
	}
	for _, sc := range direct.scenarios() {
		if d, g := direct.statuses(sc), gated.statuses(sc); d != g {
			t.Errorf("%s: directly %s, through toolgate %s", sc, d, g)
		}
	}
}

// conformanceCheck is one entry of a scenario's checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// conformanceResult holds each scenario's checks.
type conformanceResult map[string][]conformanceCheck

func (r conformanceResult) scenarios() []string {
	out := make([]string, 0, len(r))
	for sc := range r {
		out = append(out, sc)
	}
	sort.Strings(out)
	return out
}

func (r conformanceResult) count(status string) int {
	n := 0
	for _, cs := range r {
		for _, c := range cs {
			if c.Status == status {
				n++
			}
		}
	}
	return n
}

// statuses lists a scenario's check ids with their status, in order.
func (r conformanceResult) statuses(sc string) string {
	var b []string
	for _, c := range r[sc] {
		if c.Status != "INFO" {
			b = append(b, c.ID+"="+c.Status)
		}
	}
	return strings.Join(b, " ")
}

func (r conformanceResult) summary() string {
	return fmt.Sprintf("%d scenarios, %d checks passed, %d failed, %d warnings",
		len(r), r.count("SUCCESS"), r.count("FAILURE"), r.count("WARNING"))
}

// runConformance runs `conformance server --suite all` against url and
// reads the checks it saved.
func runConformance(t *testing.T, node, url string) conformanceResult {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "node_modules/@modelcontextprotocol/conformance/dist/index.js",
		"server", "--url", url, "--suite", "all", "-o", out)
	cmd.Dir = "node-conformance"
	log, err := cmd.CombinedOutput()
	// A failed check makes the suite exit 1; the checks say which.
	if ctx.Err() != nil || (err != nil && cmd.ProcessState.ExitCode() != 1) {
		t.Fatalf("conformance against %s: %v\n%s", url, err, log)
	}
	files, _ := filepath.Glob(filepath.Join(out, "server-*", "checks.json"))
	res := conformanceResult{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cs []conformanceCheck
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// The folder is server-<scenario>-<timestamp>.
		dir := strings.TrimPrefix(filepath.Base(filepath.Dir(f)), "server-")
		sc := dir[:len(dir)-len("-2026-01-01T00-00-00-000Z")]
		res[sc] = cs
	}
	if len(res) == 0 {
		t.Fatalf("conformance against %s saved no checks:\n%s", url, log)
	}
	return res
}

// startConformanceTarget builds test/mcpconformance, starts it on a free
// loopback port and returns its URL; the test's cleanup stops it by PID.
func startConformanceTarget(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpconformance")
	build := exec.Command("go", "build", "-o", bin, "./mcpconformance")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the conformance target: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT="+port)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Signal(syscall.SIGTERM)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the conformance target did not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "http://" + addr + "/mcp"
}
