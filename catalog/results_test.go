package catalog

import (
	"context"
	"strings"
	"testing"
)

func compileResultsYAML(t *testing.T, y string) (*Snapshot, error) {
	t.Helper()
	c, err := Parse([]byte("upstreams: [{url: https://api.openai.com}]\n"+y), "config.yaml")
	if err != nil {
		return nil, err
	}
	return Compile(c, "")
}

func TestResultsConfig(t *testing.T) {
	s, err := compileResultsYAML(t, `
catalog:
  results: {secrets: block, max_bytes: 4096}
  tools:
    - name: get_order
      result_rules:
        - expr: "!result.text.contains('IGNORE') && result.is_error == false && (!has(args.order_id) || args.order_id != 'x' || result.structured.status == 'ok')"
          message: no
validators:
  - name: v
    url: http://127.0.0.1:1/v
    on: [results]
`)
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Config.Catalog.Results; p.Secrets != SecretsBlock || p.MaxBytes != 4096 {
		t.Fatalf("results %+v", p)
	}
	if v := s.Validators[0]; v.Calls || !v.Results {
		t.Fatalf("validator on: calls %v results %v", v.Calls, v.Results)
	}
	rules := s.ResultRulesFor("", "get_order")
	if len(rules) != 1 || !s.AnyResultRules {
		t.Fatalf("rules %v", rules)
	}
	for _, c := range []struct {
		v    ResultVars
		want bool
	}{
		{ResultVars{Text: "fine"}, true},
		{ResultVars{Text: "IGNORE this"}, false},
		{ResultVars{Text: "fine", IsError: true}, false},
		{ResultVars{Text: `{"status":"ok"}`, Structured: map[string]any{"status": "ok"}, Args: map[string]any{"order_id": "x"}}, true},
		{ResultVars{Text: `{"status":"no"}`, Structured: map[string]any{"status": "no"}, Args: map[string]any{"order_id": "x"}}, false},
	} {
		got, err := rules[0].Eval(context.Background(), &c.v)
		if got != c.want {
			t.Errorf("%+v: %v (%v), want %v", c.v, got, err, c.want)
		}
	}
}

func TestResultsDefaults(t *testing.T) {
	s, err := compileResultsYAML(t, "validators:\n  - name: v\n    url: http://127.0.0.1:1/v\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.Config.Catalog.Results.Secrets != SecretsRedact || !s.Validators[0].Calls || s.Validators[0].Results {
		t.Fatalf("defaults %+v %+v", s.Config.Catalog.Results, s.Validators[0])
	}
}

func TestResultsConfigErrors(t *testing.T) {
	for y, want := range map[string]string{
		"catalog:\n  results: {secrets: hide}\n":                                                    "catalog.results.secrets",
		"catalog:\n  results: {max_bytes: -1}\n":                                                    "catalog.results.max_bytes",
		"validators:\n  - name: v\n    url: http://127.0.0.1:1/v\n    on: [answers]\n":              "validators[0].on[0]",
		"catalog:\n  tools:\n    - name: t\n      result_rules:\n        - expr: \"result.text\"\n": "result_rules[0]",
		"catalog:\n  tools:\n    - name: t\n      result_rules:\n        - expr: \"nope(\"\n":       "result_rules[0]",
	} {
		_, err := compileResultsYAML(t, y)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want it to name %s", y, err, want)
		}
	}
}
