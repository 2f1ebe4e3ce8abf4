package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// ruleCostLimit bounds one rule evaluation. A comparison costs 1 to 3 and a
// pass over the history about 10 per entry, so a rule over a conversation
// of two thousand calls fits; a rule that loops over the history inside a
// loop over it, or over a huge model-chosen array, stops with an error
// instead of stalling the request. The limit is also the most CPU a
// model's answer can make one rule spend (tens of milliseconds), which is
// why it is not larger.
const ruleCostLimit = 25000

// ruleInterruptEvery is how many comprehension steps pass between checks of
// the caller's context, so a client that goes away also stops a long rule.
const ruleInterruptEvery = 100

// ruleEnv is built once: building a CEL environment is costly, and one
// environment is safe for concurrent use.
var ruleEnv = sync.OnceValues(func() (*cel.Env, error) {
	entry := cel.MapType(cel.StringType, cel.DynType)
	return cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tool", cel.StringType),
		cel.Variable("calls", cel.ListType(entry)),
		cel.Variable("history", cel.ListType(entry)),
		cel.Variable("history_complete", cel.BoolType),
		cel.Variable("context", cel.MapType(cel.StringType, cel.StringType)),
	)
})

// RuleVars are what a rule reads. Values must be CEL-ready (see CELValue):
// Calls are {id, tool, args} maps of the answer's other calls, History
// {id, tool, args, result, is_error} maps of the conversation's earlier
// calls, oldest first, as CELList builds them (or nil for none).
//
// The variables are gathered for the first rule a RuleVars is evaluated
// with and kept for the call's other rules, so its fields must not change
// after that, and one RuleVars serves one goroutine at a time.
type RuleVars struct {
	Tool            string
	Args            any
	Calls           []any
	History         any
	HistoryComplete bool
	Context         map[string]string

	act *ruleActivation
}

// ruleActivation resolves a rule's variables by name. Given a map, cel-go
// wraps it anew for every evaluation, and the map itself, the boxed tool
// name and the empty defaults were allocated again for each rule.
type ruleActivation struct {
	args, tool, calls, history, historyComplete, context any
}

func (v *RuleVars) activation() *ruleActivation {
	if v.act != nil {
		return v.act
	}
	args := v.Args
	if args == nil {
		args = map[string]any{}
	}
	calls := v.Calls
	if calls == nil {
		calls = []any{}
	}
	v.act = &ruleActivation{args: args, tool: v.Tool, calls: calls, history: history(v.History),
		historyComplete: v.HistoryComplete, context: orEmptyMap(v.Context)}
	return v.act
}

// ResolveName implements interpreter.Activation.
func (a *ruleActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "args":
		return a.args, true
	case "tool":
		return a.tool, true
	case "calls":
		return a.calls, true
	case "history":
		return a.history, true
	case "history_complete":
		return a.historyComplete, true
	case "context":
		return a.context, true
	}
	return nil, false
}

// Parent implements interpreter.Activation: there is none.
func (a *ruleActivation) Parent() interpreter.Activation { return nil }

// MissingContextError reports a rule that read a context value the request
// did not send. The rule fails closed: an unknown customer is not a match.
type MissingContextError struct {
	// Key is the context name, as declared in catalog.context.
	Key string
}

// Error names the missing value by its declared name, never a value.
func (e *MissingContextError) Error() string {
	return "the request carries no context value " + strconv.Quote(e.Key)
}

// NewRule compiles a CEL rule. It reads `args` (the call's arguments, a
// map), `tool` (the called name), `calls` (the other calls of the same
// answer), `history` and `history_complete` (the conversation's earlier
// calls and whether all of it is in the request) and `context` (the
// request's declared context values). The expression must type-check to
// bool.
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
	return &Rule{Expr: expr, Message: message, ContextKeys: fieldsOf(ast, "context"), ArgKeys: fieldsOf(ast, "args"), prog: celProgram{prg}}, nil
}

// fieldsOf lists the fields a rule reads by name from the variable ident
// (ident.x or ident["x"]): for context, so a load can refuse undeclared
// values and a failed evaluation can name the one that was missing; for
// args, so a lint can name arguments the schema lacks. A field of a
// comprehension variable (h.args.x) is not the variable's own.
func fieldsOf(a *cel.Ast, ident string) []string {
	var keys []string
	add := func(k string) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	isIdent := func(e celast.Expr) bool {
		return e.Kind() == celast.IdentKind && e.AsIdent() == ident
	}
	celast.PreOrderVisit(a.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.SelectKind:
			if sel := e.AsSelect(); isIdent(sel.Operand()) {
				add(sel.FieldName())
			}
		case celast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != operators.Index || len(c.Args()) != 2 || !isIdent(c.Args()[0]) {
				return
			}
			if lit := c.Args()[1]; lit.Kind() == celast.LiteralKind {
				if k, ok := lit.AsLiteral().Value().(string); ok {
					add(k)
				}
			}
		}
	}))
	return keys
}

// Eval runs the rule on one call's arguments alone, as if the request
// carried no conversation and no context. args is the decoded argument
// object as encoding/json (with or without UseNumber) or
// jsonschema.UnmarshalJSON produce it. An error means the rule could not
// decide (a missing key, the cost limit): the caller must treat it as a
// violation, not a pass.
func (r *Rule) Eval(tool string, args any) (bool, error) {
	return r.EvalContext(context.Background(), tool, args)
}

// EvalContext is Eval that also stops when ctx ends, so a request that is
// cancelled does not finish evaluating its rules.
func (r *Rule) EvalContext(ctx context.Context, tool string, args any) (bool, error) {
	return r.EvalVars(ctx, &RuleVars{Tool: tool, Args: CELValue(args), HistoryComplete: true})
}

// EvalVars runs the rule with every variable it may read. When the rule
// fails for want of a context value it names, the error is a
// *MissingContextError.
func (r *Rule) EvalVars(ctx context.Context, v *RuleVars) (bool, error) {
	if r == nil || r.prog == nil {
		return false, errors.New("rule is not compiled")
	}
	ok, err := r.prog.eval(ctx, v)
	if err != nil {
		for _, k := range r.ContextKeys {
			if _, present := v.Context[k]; !present {
				return false, &MissingContextError{Key: k}
			}
		}
	}
	return ok, err
}

type celProgram struct{ prg cel.Program }

var _ ruleProgram = celProgram{}

func (p celProgram) eval(ctx context.Context, v *RuleVars) (ok bool, err error) {
	defer func() {
		// cel-go recovers its own panics; this guards the conversion too,
		// since argument values come from the model.
		if r := recover(); r != nil {
			ok, err = false, fmt.Errorf("rule evaluation failed: %v", r)
		}
	}()
	var out ref.Val
	if ctx.Done() == nil {
		// A context that can never end has nothing to interrupt, and
		// ContextEval would set up the checks for it on every rule. The
		// cost limit holds either way.
		out, _, err = p.prg.Eval(v.activation())
	} else {
		out, _, err = p.prg.ContextEval(ctx, v.activation())
	}
	if err != nil {
		return false, err
	}
	b, isBool := out.Value().(bool)
	if !isBool {
		return false, fmt.Errorf("rule returned %s, not a bool", out.Type().TypeName())
	}
	return b, nil
}

func history(h any) any {
	if h == nil {
		return []any{}
	}
	return h
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// CELValue converts decoded JSON for CEL, which has no json.Number: integral
// numbers become int64 (so `args.amount_cents <= 100000` compares ints, and
// 1.0 counts as an integer as in JSON Schema) and the rest float64. Values
// without numbers inside are returned as they are.
func CELValue(v any) any {
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
			out[k] = CELValue(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = CELValue(e)
		}
		return out
	}
	return v
}

// CELList converts a list of decoded JSON values into one CEL list, all
// the way down, for a variable that every rule of a request reads (the
// history). Built once, a rule's pass over a long conversation then reads
// stored CEL values instead of wrapping each Go map again on every field
// access. Numbers follow CELValue.
func CELList(items []any) any {
	out := make([]ref.Val, len(items))
	for i, e := range items {
		out[i] = celRef(e)
	}
	return types.NewRefValList(types.DefaultTypeAdapter, out)
}

func celRef(v any) ref.Val {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[ref.Val]ref.Val, len(v))
		for k, e := range v {
			m[types.String(k)] = celRef(e)
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	case []any:
		l := make([]ref.Val, len(v))
		for i, e := range v {
			l[i] = celRef(e)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, l)
	case json.Number, float64:
		// CELValue gives an int64, a float64 or (a number too large for
		// either) its text, none of which recurses.
		return types.DefaultTypeAdapter.NativeToValue(CELValue(v))
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
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
