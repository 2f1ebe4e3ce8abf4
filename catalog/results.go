package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/cel-go/cel"
)

// catalog.results.secrets values (docs/results.md).
const (
	SecretsRedact = "redact"
	SecretsBlock  = "block"
	SecretsOff    = "off"
)

// validators[].on values: what a validator is asked about.
const (
	OnCalls   = "calls"
	OnResults = "results"
)

// ResultsPolicy is catalog.results: how the tool results that flow back
// to the model are judged (docs/results.md).
type ResultsPolicy struct {
	// Secrets is redact, block or off, for credentials of known shapes.
	Secrets string `yaml:"secrets"`
	// MaxBytes refuses a larger result; 0 is no limit.
	MaxBytes int64 `yaml:"max_bytes"`
}

func (p *ResultsPolicy) setDefaults() { setString(&p.Secrets, SecretsRedact) }

func (p *ResultsPolicy) validate(ps *problems) {
	oneOf(ps, "catalog.results.secrets", p.Secrets, SecretsRedact, SecretsBlock, SecretsOff)
	if p.MaxBytes < 0 {
		ps.add("catalog.results.max_bytes", "must be 0 (no limit) or more")
	}
}

// validateOn checks a validator's on list; empty means calls.
func (v *Validator) validateOn(ps *problems, at string) {
	for j, on := range v.On {
		if on != OnCalls && on != OnResults {
			ps.add(indexPath(at+".on", j), "must be %q or %q, not %q", OnCalls, OnResults, on)
		}
	}
}

// onCalls and onResults say what a validator is asked about.
func (v *Validator) onCalls() bool   { return len(v.On) == 0 || slices.Contains(v.On, OnCalls) }
func (v *Validator) onResults() bool { return slices.Contains(v.On, OnResults) }

// ResultRule is one compiled result_rules entry: CEL over `result` ({text,
// structured, is_error}), the `args` of the call it answers (empty when
// the conversation does not hold that call) and `tool`.
type ResultRule struct {
	Expr    string
	Message string
	prg     cel.Program
}

// ResultVars are what a result rule reads. Structured and Args must be
// CEL-ready (see CELValue); Structured is nil when the result is not JSON.
type ResultVars struct {
	Tool       string
	Text       string
	Structured any
	IsError    bool
	Args       any
}

var resultEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("result", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tool", cel.StringType),
	)
})

// NewResultRule compiles a result rule; it must type-check to bool.
func NewResultRule(expr, message string) (*ResultRule, error) {
	env, err := resultEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, errors.New(oneLine(iss.Err().Error()))
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("must be a bool expression, but it has type %s", t)
	}
	prg, err := env.Program(ast, cel.CostLimit(ruleCostLimit), cel.InterruptCheckFrequency(ruleInterruptEvery))
	if err != nil {
		return nil, err
	}
	return &ResultRule{Expr: expr, Message: message, prg: prg}, nil
}

// Eval runs the rule. An error (a missing field, the cost limit) is the
// caller's to count as a failed rule: a result nobody could judge is not
// let through as judged.
func (r *ResultRule) Eval(ctx context.Context, v *ResultVars) (bool, error) {
	structured := v.Structured
	if structured == nil {
		structured = map[string]any{}
	}
	args := v.Args
	if args == nil {
		args = map[string]any{}
	}
	out, _, err := r.prg.ContextEval(ctx, map[string]any{
		"result": map[string]any{"text": v.Text, "structured": structured, "is_error": v.IsError},
		"args":   args,
		"tool":   v.Tool,
	})
	if err != nil {
		return false, errors.New(oneLine(err.Error()))
	}
	ok, isBool := out.Value().(bool)
	if !isBool {
		return false, errors.New("the rule did not give a bool")
	}
	return ok, nil
}

// compileResultRules compiles a tool's result_rules into t.
func compileResultRules(ps *problems, where func(string) string, tc *ToolConfig, t *Tool) bool {
	ok := true
	for i, rc := range tc.ResultRules {
		r, err := NewResultRule(rc.Expr, rc.Message)
		if err != nil {
			ps.add(where(indexPath(".result_rules", i)+".expr"), "tool %q: result rule %q: %v", tc.Name, rc.Expr, err)
			ok = false
			continue
		}
		t.ResultRules = append(t.ResultRules, r)
	}
	return ok
}

// ResultRulesFor returns the result rules of the catalog tool named tool,
// or of the MCP catalog entry "server/tool" when server is not empty.
func (s *Snapshot) ResultRulesFor(server, tool string) []*ResultRule {
	var t *Tool
	if server != "" {
		t = s.MCPTools[server+"/"+tool]
	} else {
		t = s.Tools[tool]
	}
	if t == nil {
		return nil
	}
	return t.ResultRules
}
