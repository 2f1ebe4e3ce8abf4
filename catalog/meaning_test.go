package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

const meaningBase = "upstreams: [{url: 'https://x'}]\ncatalog:\n  tools:\n    - name: issue_refund\n      parameters: {type: object}\n"

// problemAt returns the problems of err at path.
func problemAt(t *testing.T, err error, path string) []Problem {
	t.Helper()
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *ConfigError", err, err)
	}
	var out []Problem
	for _, p := range ce.Problems {
		if p.Path == path {
			out = append(out, p)
		}
	}
	return out
}

func TestValidatorsAndContextRejected(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, path, want string
		env                    map[string]string
	}{
		{"bad name", "validators: [{name: 'a b', url: 'https://v', tools: ['*']}]", "validators[0].name", "not a valid validator name", nil},
		{"duplicate name", "validators: [{name: a, url: 'https://v', tools: ['*']}, {name: a, url: 'https://v', tools: ['*']}]", "validators[1].name", "also the name", nil},
		{"bad url", "validators: [{name: a, url: 'ftp://v', tools: ['*']}]", "validators[0].url", "http:// or https://", nil},
		{"no url", "validators: [{name: a, tools: ['*']}]", "validators[0].url", "must be set", nil},
		{"plain http off the host", "validators: [{name: a, url: 'http://10.0.0.5/v', tools: ['*']}]", "validators[0].url", "allow_insecure", nil},
		{"empty tools", "validators: [{name: a, url: 'https://v', tools: []}]", "validators[0].tools", "must list the tools", nil},
		{"star with names", "validators: [{name: a, url: 'https://v', tools: ['*', issue_refund]}]", "validators[0].tools[0]", "list it alone", nil},
		{"unknown tool", "validators: [{name: a, url: 'https://v', tools: [issue_refund, cancel_order]}]", "validators[0].tools[1]", `"cancel_order" is not in the catalog`, nil},
		{"timeout past the deadline", "validators: [{name: a, url: 'https://v', tools: ['*'], timeout: 2m}]", "validators[0].timeout", "longer than recovery.deadline", nil},
		{"bad failure policy", "validators: [{name: a, url: 'https://v', tools: ['*'], failure_policy: maybe}]", "validators[0].failure_policy", "not one of fail, ignore", nil},
		{"secret env missing", "validators: [{name: a, url: 'https://v', tools: ['*'], secret_env: V_SECRET}]", "validators[0].secret_env", "V_SECRET is not set", nil},
		{"secret env empty", "validators: [{name: a, url: 'https://v', tools: ['*'], secret_env: V_SECRET}]", "validators[0].secret_env", "V_SECRET is not set", map[string]string{"V_SECRET": " \n"}},
		{"context name", "  context: {'customer-id': {header: X-C}}", `catalog.context["customer-id"]`, "not a valid context name", nil},
		{"context without header", "  context: {customer_id: {}}", "catalog.context.customer_id.header", "must be set", nil},
		{"context on a credential", "  context: {customer_id: {header: Authorization}}", "catalog.context.customer_id.header", "needed by the upstream", nil},
		{"context header twice", "  context: {a: {header: X-C}, b: {header: x-c}}", "catalog.context.b.header", "also the header", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := meaningBase
			if strings.HasPrefix(tc.yaml, "  ") {
				y = strings.Replace(y, "catalog:\n", "catalog:\n"+tc.yaml+"\n", 1)
			} else {
				y += tc.yaml + "\n"
			}
			_, err := compileYAML(t, y, nil, tc.env)
			if err == nil {
				t.Fatal("accepted")
			}
			ps := problemAt(t, err, tc.path)
			if len(ps) != 1 || !strings.Contains(ps[0].Message, tc.want) {
				t.Fatalf("problems at %s: %v\nall: %v", tc.path, ps, err)
			}
		})
	}
}

func TestValidatorsCompiled(t *testing.T) {
	y := meaningBase + `validators:
  - {name: all, url: 'https://v.example/check', tools: ['*'], secret_env: V_SECRET}
  - {name: local, url: 'http://127.0.0.1:9300/v', tools: [issue_refund], timeout: 250ms, failure_policy: ignore}
  - {name: lan, url: 'http://10.0.0.5/v', tools: [issue_refund], allow_insecure: true}
  - {name: defaults, url: 'https://v.example/check'}
`
	s, err := compileYAML(t, y, nil, map[string]string{"V_SECRET": "s3cret\n"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Validators) != 4 {
		t.Fatalf("%d validators", len(s.Validators))
	}
	all, local := s.Validators[0], s.Validators[1]
	if string(all.Secret) != "s3cret" || all.FailOpen || all.Timeout != DefaultValidatorTimeout || !all.Judges("anything") {
		t.Errorf("all: %+v", all)
	}
	if local.Secret != nil || !local.FailOpen || local.Timeout != 250*time.Millisecond || !local.Judges("issue_refund") || local.Judges("get_order") {
		t.Errorf("local: %+v", local)
	}
	if d := s.Validators[3]; !d.Judges("issue_refund") || d.FailOpen || d.Timeout != 300*time.Millisecond {
		t.Errorf("defaults: %+v", d)
	}
	if strings.Contains(s.Config.Validators[0].SecretEnv, "s3cret") {
		t.Error("the secret is in the Config")
	}
}

func TestRuleReadsUndeclaredContext(t *testing.T) {
	y := strings.Replace(meaningBase, "parameters: {type: object}\n",
		"parameters: {type: object}\n      rules:\n        - {expr: \"context.tenant == 'a' && context['customer_id'] == 'c'\", message: m}\n", 1)
	y = strings.Replace(y, "catalog:\n", "catalog:\n  context: {customer_id: {header: X-Customer-Id}}\n", 1)
	_, err := compileYAML(t, y, nil, nil)
	if err == nil {
		t.Fatal("accepted")
	}
	ps := problemAt(t, err, "catalog.tools[0].rules[0].expr")
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "context.tenant, which catalog.context does not declare") {
		t.Fatalf("problems: %v", err)
	}
}

func TestRuleContextKeys(t *testing.T) {
	r, err := NewRule(`context.a == 'x' || context["b"] == args.c || has(context.d) || context[args.k] == 'y'`, "m")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.ContextKeys, ","); got != "a,b,d" {
		t.Fatalf("context keys %q", got)
	}
}

// CELList keeps JSON numbers as rules compare them: integral ones as ints
// (4000.0 included), others as doubles, nested lists and maps readable.
func TestCELListValues(t *testing.T) {
	entry := map[string]any{"tool": "get_order", "result": map[string]any{
		"total": json.Number("4000.0"), "rate": json.Number("0.5"), "items": []any{json.Number("1"), "x", nil, true},
	}}
	r, err := NewRule(`history[0].result.total == 4000 && history[0].result.rate == 0.5 && history[0].result.items[0] == 1 &&
		history[0].result.items[1] == 'x' && history[0].result.items[2] == null && history[0].result.items[3] && history.size() == 1`, "m")
	if err != nil {
		t.Fatal(err)
	}
	ok, err := r.EvalVars(context.Background(), &RuleVars{Tool: "t", History: CELList([]any{entry})})
	if !ok || err != nil {
		t.Fatalf("ok %v err %v", ok, err)
	}
}
