package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// decoders are the ways a caller may have decoded a call's arguments.
var decoders = map[string]func(string) (any, error){
	"UseNumber": func(s string) (any, error) {
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return v, err
	},
	"jsonschema": func(s string) (any, error) { return jsonschema.UnmarshalJSON(strings.NewReader(s)) },
	"float64": func(s string) (any, error) {
		var v any
		err := json.Unmarshal([]byte(s), &v)
		return v, err
	},
}

func TestRuleEval(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		tool    string
		args    string
		want    bool
		wantErr string
	}{
		{"int within limit", "args.amount_cents <= 100000", "r", `{"amount_cents":500}`, true, ""},
		{"int above limit", "args.amount_cents <= 100000", "r", `{"amount_cents":100001}`, false, ""},
		{"float compared to int", "args.amount_cents <= 100000", "r", `{"amount_cents":99.5}`, true, ""},
		{"integral float is an int", "args.n == 1", "r", `{"n":1.0}`, true, ""},
		{"exponent integer", "args.n == 1000", "r", `{"n":1e3}`, true, ""},
		{"huge number", "args.n > 100", "r", `{"n":1e300}`, true, ""},
		{"beyond int64", "args.n > 100", "r", `{"n":99999999999999999999}`, true, ""},
		{"tool name", `tool == "issue_refund"`, "issue_refund", `{}`, true, ""},
		{"has", "!has(args.note)", "r", `{"amount":1}`, true, ""},
		{"nested", `args.order.id.startsWith("ord_")`, "r", `{"order":{"id":"ord_1"}}`, true, ""},
		{"list", "args.items.size() < 3 && args.items.all(i, i.qty > 0)", "r", `{"items":[{"qty":1},{"qty":2}]}`, true, ""},
		{"list element fails", "args.items.all(i, i.qty > 0)", "r", `{"items":[{"qty":1},{"qty":0}]}`, false, ""},
		{"string compare", `args.currency in ["EUR", "USD"]`, "r", `{"currency":"GBP"}`, false, ""},
		{"null value", "args.note == null", "r", `{"note":null}`, true, ""},
		{"missing key", "args.amount_cents <= 100000", "r", `{}`, false, "no such key"},
		{"wrong type", "args.amount_cents <= 100000", "r", `{"amount_cents":"lots"}`, false, "no such overload"},
		{"args not an object", "args.a == 1", "r", `[1]`, false, "unsupported index"},
	}
	for _, tt := range tests {
		for dname, decode := range decoders {
			t.Run(tt.name+"/"+dname, func(t *testing.T) {
				r, err := NewRule(tt.expr, "msg")
				if err != nil {
					t.Fatal(err)
				}
				args, err := decode(tt.args)
				if err != nil {
					t.Fatal(err)
				}
				got, err := r.Eval(tt.tool, args)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("want error containing %q, got %v, %v", tt.wantErr, got, err)
					}
					return
				}
				if err != nil || got != tt.want {
					t.Errorf("got %v, %v; want %v", got, err, tt.want)
				}
			})
		}
	}
}

func TestRuleCostLimit(t *testing.T) {
	const expr = "args.items.map(x, args.items.map(y, x + y).size()).size() > 0"
	items := make([]any, 200)
	for i := range items {
		items[i] = json.Number("1")
	}
	args := map[string]any{"items": items}
	tests := []struct {
		name    string
		limit   uint64
		args    any
		wantErr bool
	}{
		{"tiny limit", 50, args, true},
		{"default limit, large list", ruleCostLimit, args, true},
		{"default limit, small list", ruleCostLimit, map[string]any{"items": items[:5]}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := compileRule(expr, "", tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			ok, err := r.Eval("t", tt.args)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "cost") {
					t.Errorf("want a cost error, got %v, %v", ok, err)
				}
				return
			}
			if err != nil || !ok {
				t.Errorf("got %v, %v", ok, err)
			}
		})
	}
}

func TestRuleEvalCancelled(t *testing.T) {
	r, err := compileRule("args.items.all(x, args.items.all(y, x == y))", "", 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 2000)
	for i := range items {
		items[i] = int64(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.EvalContext(ctx, "t", map[string]any{"items": items}); err == nil {
		t.Error("a cancelled context did not stop the rule")
	}
}

func TestNewRuleRejects(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want string
	}{
		{"syntax", "args.n <", "Syntax error"},
		{"int result", "args.n + 1", "must be a bool expression"},
		{"string result", `"yes"`, "type string"},
		{"dyn result", "args.flag", "args.flag == true"},
		{"undeclared", "amount < 1", "undeclared reference"},
		{"tool is a string", "tool > 1", "no matching overload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRule(tt.expr, "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("want error containing %q, got %v", tt.want, err)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error: %q", err)
			}
		})
	}
}

func TestRuleNotCompiled(t *testing.T) {
	var nilRule *Rule
	for name, r := range map[string]*Rule{"nil": nilRule, "zero": {Expr: "true"}} {
		t.Run(name, func(t *testing.T) {
			if ok, err := r.Eval("t", map[string]any{}); ok || err == nil {
				t.Errorf("got %v, %v", ok, err)
			}
		})
	}
}

func TestCELValueLeavesInputAlone(t *testing.T) {
	in, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(`{"a":[1,2.5],"b":{"c":3}}`)))
	before, _ := json.Marshal(in)
	r, err := NewRule("args.a[0] == 1 && args.b.c == 3", "")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := r.Eval("t", in); !ok || err != nil {
		t.Fatalf("got %v, %v", ok, err)
	}
	after, _ := json.Marshal(in)
	if !bytes.Equal(before, after) {
		t.Errorf("args changed: %s -> %s", before, after)
	}
	if _, isNum := in.(map[string]any)["b"].(map[string]any)["c"].(json.Number); !isNum {
		t.Error("caller's json.Number replaced")
	}
}

// TestRuleVarsServeEveryRuleOfACall evaluates one RuleVars with several
// rules, as a call with many rules is judged: each rule must read the same
// variables, whichever rule came first, and a context value the request
// did not send must still fail closed.
func TestRuleVarsServeEveryRuleOfACall(t *testing.T) {
	vars := &RuleVars{
		Tool:            "refund",
		Args:            CELValue(map[string]any{"amount": json.Number("40"), "order": "o-1"}),
		Calls:           []any{map[string]any{"id": "c2", "tool": "lookup", "args": map[string]any{}}},
		HistoryComplete: true,
		Context:         map[string]string{"tenant": "acme"},
	}
	rules := []struct {
		expr string
		want bool
	}{
		{`tool == "refund"`, true},
		{`args.amount == 40 && args.order == "o-1"`, true},
		{`args.amount > 40`, false},
		{`size(calls) == 1 && calls[0].tool == "lookup"`, true},
		{`size(history) == 0 && history_complete`, true},
		{`context.tenant == "acme"`, true},
		{`context.tenant == "other"`, false},
	}
	for _, order := range [][]int{{0, 1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1, 0}} {
		v := *vars
		for _, i := range order {
			r, err := NewRule(rules[i].expr, "m")
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.EvalVars(context.Background(), &v)
			if err != nil || got != rules[i].want {
				t.Errorf("%s: %v, %v; want %v", rules[i].expr, got, err, rules[i].want)
			}
		}
		r, err := NewRule(`context.region == "eu"`, "m")
		if err != nil {
			t.Fatal(err)
		}
		var missing *MissingContextError
		if ok, err := r.EvalVars(context.Background(), &v); ok || !errors.As(err, &missing) || missing.Key != "region" {
			t.Errorf("missing context value: %v, %v", ok, err)
		}
	}
}

// TestRuleVarsWithoutValuesReadAsEmpty: a RuleVars with nothing but the
// tool name gives rules empty args, calls, history and context, not
// unbound variables.
func TestRuleVarsWithoutValuesReadAsEmpty(t *testing.T) {
	r, err := NewRule(`size(args) == 0 && size(calls) == 0 && size(history) == 0 && size(context) == 0 && !history_complete`, "m")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := r.EvalVars(context.Background(), &RuleVars{Tool: "t"}); !ok || err != nil {
		t.Fatalf("got %v, %v", ok, err)
	}
}
