package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
)

// ruleCostLimit bounds one rule evaluation. It is far above what a rule over
// a call's arguments needs (a comparison costs 1 to 3) and far below what
// would let a model-chosen list of arguments stall a request: an expression
// looping over a huge array stops with an error instead.
const ruleCostLimit = 10000

// ruleInterruptEvery is how many comprehension steps pass between checks of
// the caller's context, so a client that goes away also stops a long rule.
const ruleInterruptEvery = 100

// ruleEnv is built once: building a CEL environment is costly, and one
// environment is safe for concurrent use.
var ruleEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tool", cel.StringType),
	)
})

// NewRule compiles a CEL rule over a call's arguments (`args`, a map) and
// the called tool's name (`tool`). The expression must type-check to bool.
func NewRule(expr, message string) (*Rule, error) {
	return compileRule(expr, message, ruleCostLimit)
}

func compileRule(expr, message string, costLimit uint64) (*Rule, error) {
	env, err := ruleEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, errors.New(oneLine(iss.Err().Error()))
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) {
		hint := ""
		if t.IsExactType(cel.DynType) {
			hint = " (compare it explicitly, e.g. args.flag == true)"
		}
		return nil, fmt.Errorf("must be a bool expression, but it has type %s%s", t, hint)
	}
	prg, err := env.Program(ast,
		cel.CostLimit(costLimit),
		cel.InterruptCheckFrequency(ruleInterruptEvery),
	)
	if err != nil {
		return nil, err
	}
	return &Rule{Expr: expr, Message: message, prog: celProgram{prg}}, nil
}

// Eval runs the rule on one call. args is the decoded argument object as
// encoding/json (with or without UseNumber) or jsonschema.UnmarshalJSON
// produce it. An error means the rule could not decide (a missing key, the
// cost limit): the caller must treat it as a violation, not a pass.
func (r *Rule) Eval(tool string, args any) (bool, error) {
	return r.EvalContext(context.Background(), tool, args)
}

// EvalContext is Eval that also stops when ctx ends, so a request that is
// cancelled does not finish evaluating its rules.
func (r *Rule) EvalContext(ctx context.Context, tool string, args any) (bool, error) {
	if r == nil || r.prog == nil {
		return false, errors.New("rule is not compiled")
	}
	return r.prog.eval(ctx, tool, args)
}

type celProgram struct{ prg cel.Program }

var _ ruleProgram = celProgram{}

func (p celProgram) eval(ctx context.Context, tool string, args any) (ok bool, err error) {
	defer func() {
		// cel-go recovers its own panics; this guards the conversion too,
		// since argument values come from the model.
		if r := recover(); r != nil {
			ok, err = false, fmt.Errorf("rule evaluation failed: %v", r)
		}
	}()
	out, _, err := p.prg.ContextEval(ctx, map[string]any{"args": celValue(args), "tool": tool})
	if err != nil {
		return false, err
	}
	b, isBool := out.Value().(bool)
	if !isBool {
		return false, fmt.Errorf("rule returned %s, not a bool", out.Type().TypeName())
	}
	return b, nil
}

// celValue converts decoded JSON for CEL, which has no json.Number: integral
// numbers become int64 (so `args.amount_cents <= 100000` compares ints, and
// 1.0 counts as an integer as in JSON Schema) and the rest float64. Values
// without numbers inside are returned as they are.
func celValue(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, err := v.Float64()
		if err != nil {
			return v.String()
		}
		if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
			return int64(f)
		}
		return f
	case float64:
		if v == math.Trunc(v) && v >= -(1<<63) && v < 1<<63 {
			return int64(v)
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = celValue(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = celValue(e)
		}
		return out
	}
	return v
}

// oneLine keeps CEL's diagnostics and drops the source excerpt and caret
// lines under each, which read as noise once folded onto one line.
func oneLine(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "|") {
			keep = append(keep, t)
		}
	}
	return strings.Join(keep, "; ")
}
