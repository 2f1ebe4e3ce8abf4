package deploy_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

const (
	rulesPath     = "prometheus/rules.yaml"
	rulesTestPath = "prometheus/rules_test.yaml"
	dashboardPath = "grafana/toolgate-dashboard.json"
)

// promtool finds promtool. Without it the test is skipped on a developer's
// machine and fails in CI, which installs it (.ci/run).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found; CI must install it (Debian package prometheus, see .ci/run)")
		}
		t.Skip("promtool not found: `apt-get install prometheus` to run the rule tests (they fail under CI=true)")
	}
	return p
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

func TestPromtoolCheckRules(t *testing.T) {
	runPromtool(t, "check", "rules", rulesPath)
}

func TestPromtoolTestRules(t *testing.T) {
	runPromtool(t, "test", "rules", rulesTestPath)
}

// metricInfo is what toolgate exports under one name.
type metricInfo struct {
	labels    []string
	histogram bool
}

// exportedMetrics reads toolgate's metric definitions from the proxy
// package's source: every prometheus.New{Counter,Gauge,Histogram}[Vec] call
// with its Name and label names. Reading the source rather than importing
// the package keeps the proxy's dependencies out of this module. A renamed
// metric or label then fails here rather than in an empty dashboard.
func exportedMetrics(t *testing.T) map[string]metricInfo {
	t.Helper()
	fset := token.NewFileSet()
	// The proxy's metrics are defined in proxy/observe, and the approval
	// metrics beside the approvals themselves; every package of proxy/ is
	// read, so a metric moved between its rooms is still found.
	var files []string
	for _, pattern := range []string{"proxy/*.go", "proxy/*/*.go", "approval/*.go"} {
		found, err := filepath.Glob(filepath.Join(repoRoot, filepath.FromSlash(pattern)))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, found...)
	}
	out := map[string]metricInfo{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "prometheus" {
				return true
			}
			kind := strings.TrimPrefix(sel.Sel.Name, "New")
			vec := strings.HasSuffix(kind, "Vec")
			switch strings.TrimSuffix(kind, "Vec") {
			case "Counter", "Gauge", "Histogram", "Summary":
			default:
				return true
			}
			opts, ok := call.Args[0].(*ast.CompositeLit)
			if !ok {
				t.Errorf("%s: %s with options that are not a literal", fset.Position(call.Pos()), sel.Sel.Name)
				return true
			}
			name := ""
			for _, e := range opts.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
						name = stringLit(kv.Value)
					}
				}
			}
			if name == "" {
				t.Errorf("%s: %s without a literal Name", fset.Position(call.Pos()), sel.Sel.Name)
				return true
			}
			info := metricInfo{histogram: strings.HasPrefix(kind, "Histogram")}
			if vec {
				lit, ok := call.Args[len(call.Args)-1].(*ast.CompositeLit)
				if !ok {
					t.Errorf("%s: %s labels are not a literal", fset.Position(call.Pos()), name)
					return true
				}
				for _, e := range lit.Elts {
					info.labels = append(info.labels, stringLit(e))
				}
			}
			out[name] = info
			return true
		})
	}
	if len(out) == 0 {
		t.Fatal("found no metric definitions in proxy/")
	}
	return out
}

func stringLit(e ast.Expr) string {
	if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
		if s, err := strconv.Unquote(b.Value); err == nil {
			return s
		}
	}
	return ""
}

var (
	metricRE   = regexp.MustCompile(`\btoolgate_[a-z0-9_]+`)
	groupingRE = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	selectorRE = regexp.MustCompile(`\{[^}]*\}`)
)

// checkExpr checks that every toolgate metric an expression reads exists
// and has every label the expression groups or matches on.
func checkExpr(t *testing.T, where, expr string, metrics map[string]metricInfo) {
	t.Helper()
	var used []string
	for _, m := range groupingRE.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				used = append(used, l)
			}
		}
	}
	for _, sel := range selectorRE.FindAllString(expr, -1) {
		for _, m := range matcherRE.FindAllStringSubmatch(sel, -1) {
			used = append(used, m[1])
		}
	}
	names := metricRE.FindAllString(expr, -1)
	for _, name := range names {
		base, info, ok := name, metrics[name], false
		if _, ok = metrics[name]; !ok {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, cut := strings.CutSuffix(name, suf); cut && metrics[b].histogram {
					base, info, ok = b, metrics[b], true
				}
			}
		}
		if !ok {
			t.Errorf("%s: toolgate exports no metric %s", where, name)
			continue
		}
		for _, l := range used {
			if l == "le" && info.histogram && strings.HasSuffix(name, "_bucket") {
				continue
			}
			if !slices.Contains(info.labels, l) {
				t.Errorf("%s: %s has no label %q (it has %v)", where, base, l, info.labels)
			}
		}
	}
}

func TestRulesUseExportedMetrics(t *testing.T) {
	metrics := exportedMetrics(t)
	// The source reader itself: two definitions whose shape the rules and
	// the dashboard depend on.
	if m := metrics["toolgate_hallucinations_total"]; !slices.Contains(m.labels, "catalog_version") || m.histogram {
		t.Errorf("read toolgate_hallucinations_total as %+v", m)
	}
	if m := metrics["toolgate_added_latency_seconds"]; !m.histogram || !slices.Contains(m.labels, "api") {
		t.Errorf("read toolgate_added_latency_seconds as %+v", m)
	}
	data, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := sigsyaml.UnmarshalStrict(data, &rf); err != nil {
		t.Fatalf("%s: %v", rulesPath, err)
	}
	want := map[string]bool{"toolgate:hallucination_rate:ratio_rate5m": false, "ToolgateHallucinationRateHigh": false}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Record + r.Alert
			want[name] = true
			checkExpr(t, rulesPath+": "+name, r.Expr, metrics)
			if r.Alert != "" {
				if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
					t.Errorf("alert %s needs a severity label and summary and description annotations", r.Alert)
				}
				if !strings.Contains(r.Annotations["summary"]+r.Annotations["description"], "$labels.catalog_version") {
					t.Errorf("alert %s: the annotations should name the catalog version", r.Alert)
				}
			}
		}
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("%s: no rule %s", rulesPath, name)
		}
	}
}

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		GridPos struct{ X, Y, W, H int } `json:"gridPos"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVars stands in for Grafana's variables so the queries can be
// handed to promtool as written.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$catalog_version", ".*")

func TestDashboard(t *testing.T) {
	metrics := exportedMetrics(t)
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: title, uid and panels are required", dashboardPath)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" {
		t.Error("dashboard: no datasource variable; the dashboard would be tied to one Prometheus")
	}

	var exprs []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		where := fmt.Sprintf("%s: panel %q", dashboardPath, p.Title)
		if ids[p.ID] {
			t.Errorf("%s: duplicate id %d", where, p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("%s: datasource %+v, want the ${datasource} variable", where, p.Datasource)
		}
		if p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: gridPos %+v", where, p.GridPos)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no queries", where)
		}
		for _, tg := range p.Targets {
			checkExpr(t, where, tg.Expr, metrics)
			exprs = append(exprs, tg.Expr)
		}
	}

	// What the dashboard must show.
	has := func(parts ...string) bool {
		return slices.ContainsFunc(exprs, func(e string) bool {
			for _, p := range parts {
				if !strings.Contains(e, p) {
					return false
				}
			}
			return true
		})
	}
	for _, want := range [][]string{
		{"toolgate:hallucination_rate:ratio_rate5m"},
		{"toolgate_requests_total", "outcome"},
		{"toolgate_recoveries_total", "result"},
		{"toolgate_escalations_total", "reason"},
		{"histogram_quantile(0.5,", "toolgate_added_latency_seconds_bucket"},
		{"histogram_quantile(0.99,", "toolgate_added_latency_seconds_bucket"},
		// Strict mode: the finding rates of marked and unmarked tools side
		// by side, and what became of the offered tools.
		{"toolgate_strict_calls_total", "result!~"},
		{"toolgate_tool_calls_total", "- sum(rate(toolgate_strict_calls_total"},
		{"toolgate_strict_tools_total", "result"},
		{"toolgate_approvals_total", "result"},
		{"max(toolgate_approvals_pending)"},
	} {
		if !has(want...) {
			t.Errorf("dashboard: no query with %q", want)
		}
	}

	// Every query parses: promtool checks them as recording rules.
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(grafanaVars.Replace(e))
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, "check", "rules", path)
}
