package recovery

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/validate"
)

// Settings are the ladder's knobs, taken from one config snapshot.
type Settings struct {
	Strategy         string
	RecoveryAttempts int
	RepromptAttempts int
	Threshold        float64
	Shortlist        int
	// Prompt is the decision template; empty means DefaultPrompt.
	Prompt    string
	Deadline  time.Duration
	Truncated string
	Shadow    bool
	// AbstainTool is the virtual tool's name when it was injected into this
	// request, else empty.
	AbstainTool string
}

// SettingsFrom reads the ladder's settings from a snapshot.
func SettingsFrom(s *catalog.Snapshot) Settings {
	c := s.Config
	return Settings{
		Strategy:         c.Recovery.Strategy,
		RecoveryAttempts: valueOrZero(c.Recovery.MaxAttempts),
		RepromptAttempts: valueOrZero(c.Reprompt.MaxAttempts),
		Threshold:        valueOrZero(c.Recovery.ConfidenceThreshold),
		Shortlist:        valueOrZero(c.Recovery.Shortlist),
		Prompt:           s.Prompt,
		Deadline:         c.Recovery.Deadline.D(),
		Truncated:        c.Truncated,
		Shadow:           c.Mode == catalog.ModeShadow,
	}
}

// valueOrZero reads an optional config number: 0 when it is unset.
func valueOrZero[T int | float64](p *T) T {
	if p == nil {
		return 0
	}
	return *p
}

// Input is one answer to judge and everything needed to repair it.
type Input struct {
	Turn *Turn
	// Judge judges the calls at positions at of one answer's calls, in
	// this request's context, returning a report per position. It is
	// called for the original answer and for every repaired call, so each
	// call that goes out passed every check. It may do I/O (validators),
	// bounded by ctx, which carries recovery.deadline.
	Judge     JudgeFunc
	Effective *catalog.Effective
	Settings  *Settings
	// Ask asks the model again. nil means nobody can be asked: a bad
	// call escalates with its own finding as the reason.
	Ask Asker
	// Stateful is set when the conversation lives upstream and cannot be
	// extended by a re-query (Responses `conversation`, or a stream whose
	// stored id was already sent).
	Stateful bool
	// StoresAnswers is set when the provider stores each answer for the
	// client to continue from: an unknown tool is then repaired by asking
	// the model (correction), never by a substitute toolgate writes, which
	// no stored answer would hold.
	StoresAnswers bool
	// UserText is the last user message, used to rank a shortlist.
	UserText string
}

// JudgeFunc judges calls[at[k]] for each k, each call seeing the other
// calls of the batch as its siblings. judge.Judge.Batch is one.
type JudgeFunc func(ctx context.Context, calls []validate.ToolCall, at []int) []validate.CallReport

// Result is what the ladder made of one answer.
type Result struct {
	Outcome Outcome
	// Calls are the final calls, position for position with Turn.Calls and
	// with the same ids. Only repaired positions differ.
	Calls []validate.ToolCall
	// Changed marks the positions whose call was replaced.
	Changed []bool
	// Original are the answer's calls as the model sent them.
	Original []validate.ToolCall
	// Reports judge the original calls, for metrics.
	Reports    []validate.CallReport
	Escalation *Escalation
	// AbstainReason is the model's reason when it used the abstain exit.
	AbstainReason string
	// Upstream is a retryable re-query failure to pass to the client as is.
	Upstream *UpstreamError
	Events   []Event
	// Turns are the re-query answers, for usage accounting.
	Turns []*Turn
}

// AnyChanged reports whether the ladder replaced any call, so the answer
// must be rewritten rather than forwarded as the upstream sent it.
func (r *Result) AnyChanged() bool { return slices.Contains(r.Changed, true) }

// Reply texts. They are sent to the model; keep them short and literal.
const (
	heldText = "Not executed: this call is held until every call in the batch is valid. Do not repeat it."
)

// ErrCanceled is returned when the client went away during a re-query.
var ErrCanceled = errors.New("the client canceled the request")

// Run judges one answer and climbs the ladder. It returns ErrCanceled when
// ctx was canceled by the client; every other failure becomes an escalation
// or an upstream error in the Result.
func Run(ctx context.Context, in *Input) (*Result, error) {
	l := &ladder{input: in, settings: in.Settings}
	l.result.Original = in.Turn.Calls
	l.result.Calls = append([]validate.ToolCall(nil), in.Turn.Calls...)
	l.result.Changed = make([]bool, len(in.Turn.Calls))
	if l.settings.Deadline > 0 {
		// The deadline covers the checks too: a validator is a call out
		// like a re-query.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.settings.Deadline)
		defer cancel()
	}
	all := make([]int, len(in.Turn.Calls))
	for i := range all {
		all[i] = i
	}
	l.result.Reports = in.Judge(ctx, in.Turn.Calls, all)
	l.reports = append([]validate.CallReport(nil), l.result.Reports...)
	if !l.settings.Shadow {
		for i := range l.result.Calls {
			l.unprefix(i)
		}
	}
	l.recoveriesLeft, l.repromptsLeft = l.settings.RecoveryAttempts, l.settings.RepromptAttempts
	r, err := l.run(ctx)
	l.result.Outcome, l.result.Escalation, l.result.Upstream, l.result.AbstainReason = r.outcome, r.escalation, r.upstream, r.abstain
	return &l.result, err
}

// rung is what one step of the ladder concluded. A rung that ends the
// ladder carries its outcome and what goes with it (the escalation, the
// upstream failure handed back, the abstain reason); a repair that worked
// carries the outcome the ladder goes on with.
type rung struct {
	end        bool
	outcome    Outcome
	escalation *Escalation
	upstream   *UpstreamError
	abstain    string
}

// done ends the ladder with outcome o.
func done(o Outcome) rung { return rung{end: true, outcome: o} }

// event records one re-query's event with its metric result.
func (l *ladder) event(ev Event, result string) {
	ev.Result = result
	l.result.Events = append(l.result.Events, ev)
}

type ladder struct {
	input          *Input
	settings       *Settings
	result         Result
	reports        []validate.CallReport // current reports, position for position
	recoveriesLeft int
	repromptsLeft  int
	attempts       []Attempt
}

func (l *ladder) run(ctx context.Context) (rung, error) {
	calls := l.input.Turn.Calls
	judged := 0
	for _, c := range calls {
		if c.Kind != validate.Other {
			judged++
		}
	}
	if judged == 0 {
		return done(l.pass()), nil
	}
	if reason, ok := l.abstention(l.input.Turn); ok {
		return rung{end: true, outcome: Abstained, abstain: reason}, nil
	}
	if l.input.Turn.Truncated() {
		if l.settings.Truncated == catalog.TruncatedPass {
			return done(l.pass()), nil
		}
		for i := range calls {
			l.reports[i].Findings = append(l.reports[i].Findings, validate.TruncatedCall())
			l.result.Reports[i] = l.reports[i]
		}
		return l.escalate(string(validate.Truncated), "the answer was cut off by the token limit inside a tool call", -1), nil
	}
	if l.input.Effective.Len() == 0 && l.input.Ask != nil {
		// Without an asker the call's own finding says it: the tool
		// does not exist here.
		return l.escalate(ReasonNoTools, "the model called a tool but no tool may be called in this request", -1), nil
	}
	if len(l.badPositions(validate.ClassName, validate.ClassArgs)) == 0 {
		return l.finishValid(), nil
	}
	if l.settings.Shadow {
		if len(l.badPositions(validate.ClassName)) > 0 {
			return done(ShadowWouldRecover), nil
		}
		return done(ShadowWouldReprompt), nil
	}
	if l.input.Stateful {
		return l.escalate(ReasonStateful, "the conversation is stored upstream, so the call cannot be repaired", -1), nil
	}
	if l.input.Ask == nil {
		return l.unaskable(), nil
	}
	return l.repair(ctx)
}

// unaskable ends the ladder of an answer no model can be asked about
// again (an MCP client's call): the refusal's findings go to the caller,
// whose model may call again. The reason is the first bad call's.
func (l *ladder) unaskable() rung {
	bad := l.badPositions(validate.ClassName, validate.ClassArgs)
	reason := "the arguments do not pass the tool's checks"
	if v := l.reports[bad[0]]; v.Worst() == validate.ClassName {
		reason = v.Findings[0].Message
	}
	return l.escalate(l.primaryCode(bad), reason, -1)
}

// repair runs the name rung, then the arguments rung, on the calls that
// need them, and the last rung on the batch they leave.
func (l *ladder) repair(ctx context.Context) (rung, error) {
	outcome := Pass
	if names := l.badPositions(validate.ClassName); len(names) > 0 {
		var r rung
		var err error
		if l.settings.Strategy == catalog.StrategyCorrection || l.input.StoresAnswers {
			r, err = l.chain(ctx, names, KindRecovery)
		} else {
			r, err = l.decideAll(ctx, names)
		}
		if err != nil || r.end {
			return r, err
		}
		outcome = Worse(outcome, r.outcome)
	}
	if args := l.badPositions(validate.ClassArgs); len(args) > 0 {
		r, err := l.chain(ctx, args, KindReprompt)
		if err != nil || r.end {
			return r, err
		}
		outcome = Worse(outcome, r.outcome)
	}
	r := l.finishValid()
	if r.escalation != nil {
		return r, nil
	}
	return done(Worse(r.outcome, outcome)), nil
}

func (l *ladder) pass() Outcome {
	if l.settings.Shadow {
		return ShadowPass
	}
	return Pass
}

// finishValid applies the last rung to a batch that is valid: a call to a
// confirm tool needs a person before it runs.
func (l *ladder) finishValid() rung {
	for i, v := range l.reports {
		if v.Tool != nil && v.Tool.Policy == catalog.PolicyConfirm {
			if l.settings.Shadow {
				return done(ShadowWouldEscalate)
			}
			l.reports[i].Findings = append(l.reports[i].Findings, validate.NeedsConfirmation(""))
			return l.escalate(string(validate.ConfirmationRequired), "the call is valid but its tool needs a person to confirm it", i)
		}
	}
	return done(l.pass())
}

// badPositions lists the positions whose worst finding is in one of classes.
func (l *ladder) badPositions(classes ...validate.Class) []int {
	var out []int
	for i, v := range l.reports {
		w := v.Worst()
		for _, c := range classes {
			if w == c {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// unprefix gives a call accepted through catalog.strip_prefixes the real
// tool's name, so the agent can dispatch it. The operator declared the
// prefix; the change is counted (prefix_stripped) and logged, never silent.
func (l *ladder) unprefix(i int) {
	v := l.reports[i]
	if v.Stripped && v.Tool != nil && l.result.Calls[i].Name != v.Tool.Name {
		l.result.Calls[i].Name = v.Tool.Name
		l.result.Changed[i] = true
	}
}

// replies answers every call of turn in order: the calls at the given turn
// indexes get their error text, all others are held.
func replies(turn *Turn, errs map[int]string) []CallReply {
	out := make([]CallReply, len(turn.Calls))
	for j, c := range turn.Calls {
		if msg, ok := errs[j]; ok {
			out[j] = CallReply{CallID: c.ID, Content: msg, IsError: true}
		} else {
			out[j] = CallReply{CallID: c.ID, Content: heldText}
		}
	}
	return out
}

// decideAll runs the decision strategy for each call naming a tool that does
// not exist here. Each call costs one recovery attempt.
func (l *ladder) decideAll(ctx context.Context, positions []int) (rung, error) {
	for _, i := range positions {
		if l.recoveriesLeft <= 0 {
			return l.escalate(ReasonBudget, "the recovery budget is spent", -1), nil
		}
		l.recoveriesLeft--
		if r, err := l.decide(ctx, i); err != nil || r.end {
			return r, err
		}
	}
	return rung{outcome: Substituted}, nil
}

// decide asks the model what the call at position i meant and applies its
// decision: a substitute that passes every check goes on, anything else
// ends the ladder.
func (l *ladder) decide(ctx context.Context, i int) (rung, error) {
	orig := l.input.Turn.Calls[i]
	start := time.Now()
	ev := Event{Strategy: catalog.StrategyDecision, Name: orig.Name, ArgsBytes: len(orig.Args), Confidence: -1}
	l.attempts = append(l.attempts, callAttempt("call", orig, l.reports[i].Findings))
	turn, err := l.ask(ctx, l.decisionQuery(orig, i))
	ev.Duration = time.Since(start)
	if err != nil || turn == nil {
		l.event(ev, "upstream_error")
		return l.upstreamFailed(ctx, err)
	}
	code := string(l.reports[i].Codes()[0])
	if len(turn.Calls) > 0 && strings.TrimSpace(turn.Text) == "" {
		l.event(ev, "invalid_decision")
		l.attempts = append(l.attempts, Attempt{Kind: "decision", Decision: "invalid"})
		return l.escalate(ReasonInvalidDecision, "the model answered the recovery prompt with a tool call instead of a decision", -1), nil
	}
	proposal, perr := ParseProposal(turn.Text)
	if perr != nil {
		l.event(ev, "invalid_decision")
		l.attempts = append(l.attempts, Attempt{Kind: "decision", Decision: "invalid"})
		return l.escalate(ReasonInvalidDecision, "the recovery answer was not a valid decision: "+perr.Error(), -1), nil
	}
	conf := proposal.Confidence
	ev.Confidence = conf
	ev.Suggested = proposal.Tool
	da := Attempt{Kind: "decision", Decision: proposal.Decision, Confidence: &conf, Tool: proposal.Tool}
	if proposal.Decision == DecisionSubstitute {
		raw := string(proposal.Arguments)
		da.Arguments, da.ArgumentsRaw = objectOrNil(proposal.Arguments), &raw
	}
	l.attempts = append(l.attempts, da)
	if proposal.Decision == DecisionEscalate {
		l.event(ev, "escalated")
		r := l.escalate(code, proposal.Reason, -1)
		r.escalation.OriginalIntent = proposal.OriginalIntent
		r.escalation.MissingCapability = proposal.MissingCapability
		return r, nil
	}
	if conf < l.settings.Threshold {
		l.event(ev, "escalated")
		return l.escalate(code, "the proposed substitute is below the confidence threshold", -1), nil
	}
	return l.substitute(ctx, i, &proposal, ev), nil
}

// decisionQuery asks what the call at position i of the answer meant.
func (l *ladder) decisionQuery(orig validate.ToolCall, i int) *Query {
	prompt := FillPrompt(l.settings.Prompt, PromptInput{
		ToolName:     orig.Name,
		Arguments:    string(orig.Args),
		ErrorMessage: findingText(l.reports[i].Findings),
		Tools:        l.promptTools(orig),
		Threshold:    l.settings.Threshold,
	})
	return &Query{Kind: KindRecovery, Decision: true, History: []Round{{
		Turn:    l.input.Turn,
		Replies: replies(l.input.Turn, map[int]string{i: prompt}),
	}}}
}

// substitute checks the model's substitute for the call at position i and
// puts it in place when it may run, or in front of a person when its tool
// needs one.
func (l *ladder) substitute(ctx context.Context, i int, proposal *Proposal, ev Event) rung {
	tool, st, stripped := l.input.Effective.Lookup(proposal.Tool)
	if st != catalog.Found || stripped {
		l.event(ev, "invalid_decision")
		return l.escalate(ReasonInvalidDecision, "the proposed substitute is not a tool of this request", -1)
	}
	sub := validate.ToolCall{ID: l.input.Turn.Calls[i].ID, Name: proposal.Tool, Args: proposal.Arguments, Kind: validate.Function}
	confirm := tool.Policy == catalog.PolicyConfirm
	if !tool.Substitutable && !confirm {
		l.event(ev, "invalid_decision")
		return l.escalate(ReasonInvalidDecision, "the proposed substitute's tool may not be substituted", -1)
	}
	// Checked before the confirm rung too: the escalation hands the call to a
	// person to approve, and it must be one that could run as it stands.
	batch := append([]validate.ToolCall(nil), l.result.Calls...)
	batch[i] = sub
	v := l.input.Judge(ctx, batch, []int{i})[0]
	if !v.Valid() {
		l.event(ev, "invalid_decision")
		l.attempts = append(l.attempts, callAttempt("call", sub, v.Findings))
		return l.escalate(ReasonInvalidDecision, "the proposed substitute's arguments are not valid", -1)
	}
	if confirm {
		l.event(ev, "escalated")
		v.Findings = append(v.Findings, validate.NeedsConfirmation(""))
		l.result.Calls[i], l.result.Changed[i], l.reports[i] = sub, true, v
		return l.escalate(string(validate.ConfirmationRequired), "the substitute's tool needs a person to confirm it", i)
	}
	l.event(ev, "substituted")
	l.result.Calls[i], l.result.Changed[i], l.reports[i] = sub, true, v
	return rung{}
}

// promptTools lists the substitutable tools for the recovery prompt,
// shortlisted when the catalog is large.
func (l *ladder) promptTools(bad validate.ToolCall) []PromptTool {
	var tools []*catalog.Tool
	for _, t := range l.input.Effective.Tools() {
		if t.Substitutable && t.Policy != catalog.PolicyConfirm && t.Name != l.settings.AbstainTool {
			tools = append(tools, t)
		}
	}
	if l.settings.Shortlist > 0 && len(tools) > l.settings.Shortlist {
		tools = Shortlist(tools, bad.Name, bad.Args, l.input.UserText, l.settings.Shortlist)
	}
	out := make([]PromptTool, len(tools))
	for i, t := range tools {
		out[i] = PromptTool{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	return out
}

// chain asks the model to fix the calls at positions by replying with the
// reasons, and keeps asking with the new answer while the budget allows.
// It serves the correction strategy and the reprompt step alike.
func (l *ladder) chain(ctx context.Context, positions []int, kind QueryKind) (rung, error) {
	turn := l.input.Turn
	// at maps a call index of turn to the position it answers for, or -1.
	at := make([]int, len(turn.Calls))
	for j := range at {
		at[j] = j
	}
	pending := positions
	var history []Round
	for {
		qkind, spent := l.spend(pending)
		if spent {
			return l.escalate(ReasonBudget, "the "+budgetName(qkind)+" budget is spent", -1), nil
		}
		history = append(history, Round{Turn: turn, Replies: replies(turn, l.rejections(turn, at, pending))})
		start := time.Now()
		next, err := l.ask(ctx, &Query{Kind: qkind, History: append([]Round(nil), history...)})
		ev := Event{Strategy: chainStrategy(qkind), Confidence: -1, Duration: time.Since(start)}
		if len(pending) > 0 {
			ev.Name = l.input.Turn.Calls[pending[0]].Name
			ev.ArgsBytes = len(l.input.Turn.Calls[pending[0]].Args)
		}
		if err != nil || next == nil {
			l.event(ev, "upstream_error")
			return l.upstreamFailed(ctx, err)
		}
		if reason, ok := l.abstention(next); ok {
			// The exit is offered in every re-query too: a model told its
			// call was wrong may rightly answer that no tool fits.
			l.event(ev, string(Abstained))
			return rung{end: true, outcome: Abstained, abstain: reason}, nil
		}
		if next.Truncated() {
			l.event(ev, "escalated")
			return l.escalate(string(validate.Truncated), "the repaired answer was cut off by the token limit", -1), nil
		}
		nextAt, ok := l.mapCalls(next, pending)
		if !ok {
			l.event(ev, "escalated")
			l.attempts = append(l.attempts, Attempt{Kind: string(qkind), Decision: "unmatched"})
			return l.escalate(l.primaryCode(pending), "the model's new answer did not replace every rejected call", -1), nil
		}
		still := l.place(ctx, next, nextAt, &ev)
		if len(still) == 0 {
			if qkind == KindRecovery {
				l.event(ev, "corrected")
				return rung{outcome: Corrected}, nil
			}
			l.event(ev, "reprompted")
			return rung{outcome: Reprompted}, nil
		}
		if l.reports[still[0]].Worst() == validate.ClassFinal || !l.canRetry(still) {
			// The model was asked and failed: the finding it left is the
			// reason, and this was the chain's last event. The answer that
			// failed is an attempt too, or the escalation would show only
			// findings the model already fixed.
			l.event(ev, "escalated")
			for _, p := range still {
				l.attempts = append(l.attempts, callAttempt("call", l.result.Calls[p], l.reports[p].Findings))
			}
			return l.escalate(l.primaryCode(still), "the repaired call is still not acceptable", -1), nil
		}
		// Only the last event of a chain decides the metric result.
		l.event(ev, "")
		turn, at, pending = next, nextAt, still
	}
}

// spend takes one attempt for the next round on the calls at pending: a
// recovery attempt while any of them names a bad tool, else a reprompt
// attempt. spent reports a budget already used up.
func (l *ladder) spend(pending []int) (kind QueryKind, spent bool) {
	for _, p := range pending {
		if l.reports[p].Worst() == validate.ClassName {
			if l.recoveriesLeft <= 0 {
				return KindRecovery, true
			}
			l.recoveriesLeft--
			return KindRecovery, false
		}
	}
	if l.repromptsLeft <= 0 {
		return KindReprompt, true
	}
	l.repromptsLeft--
	return KindReprompt, false
}

func budgetName(k QueryKind) string {
	if k == KindRecovery {
		return "recovery"
	}
	return "reprompt"
}

func chainStrategy(k QueryKind) string {
	if k == KindRecovery {
		return catalog.StrategyCorrection
	}
	return "reprompt"
}

// rejections are the error replies to the calls of turn that answer for a
// pending position, by the turn's call index; each is an attempt too.
func (l *ladder) rejections(turn *Turn, at, pending []int) map[int]string {
	errs := map[int]string{}
	for j := range turn.Calls {
		p := at[j]
		if p < 0 || !contains(pending, p) {
			continue
		}
		l.attempts = append(l.attempts, callAttempt("call", l.result.Calls[p], l.reports[p].Findings))
		errs[j] = l.errorText(turn.Calls[j], l.reports[p])
	}
	return errs
}

// place puts each repaired call of next at its position and judges them
// with the others, so a call's siblings are the answer as it now stands
// and its validators run side by side. It returns the positions still not
// valid.
func (l *ladder) place(ctx context.Context, next *Turn, nextAt []int, ev *Event) []int {
	var fixedAt []int
	for j, c := range next.Calls {
		p := nextAt[j]
		if p < 0 {
			continue
		}
		l.result.Calls[p] = validate.ToolCall{ID: l.input.Turn.Calls[p].ID, Name: c.Name, Args: c.Args, Kind: c.Kind, BadShape: c.BadShape}
		l.result.Changed[p] = true
		fixedAt = append(fixedAt, p)
		ev.Suggested = c.Name
	}
	var still []int
	for k, v := range l.input.Judge(ctx, l.result.Calls, fixedAt) {
		p := fixedAt[k]
		l.reports[p] = v
		l.unprefix(p)
		if !v.Valid() {
			still = append(still, p)
		}
	}
	return still
}

// canRetry reports whether the budget allows another round for the calls at
// positions: a recovery attempt if any of them still names a bad tool, else
// a reprompt attempt.
func (l *ladder) canRetry(positions []int) bool {
	for _, p := range positions {
		if l.reports[p].Worst() == validate.ClassName {
			return l.recoveriesLeft > 0
		}
	}
	return l.repromptsLeft > 0
}

// mapCalls pairs the calls of a new answer with the positions that were
// rejected. A new call that repeats a held call exactly is ignored: the
// model was told not to repeat it. What remains must match the rejected
// positions one for one, in order; anything else is not a repair.
func (l *ladder) mapCalls(next *Turn, pending []int) ([]int, bool) {
	at := make([]int, len(next.Calls))
	k := 0
	for j, c := range next.Calls {
		at[j] = -1
		if l.repeatsHeld(c, pending) {
			continue
		}
		if k >= len(pending) {
			return nil, false
		}
		at[j] = pending[k]
		k++
	}
	return at, k == len(pending)
}

func (l *ladder) repeatsHeld(c validate.ToolCall, pending []int) bool {
	for p, held := range l.result.Calls {
		if contains(pending, p) {
			continue
		}
		if held.Name == c.Name && jsonx.SameText(held.Args, c.Args) {
			return true
		}
	}
	return false
}

// errorText is the tool result for a rejected call: the exact reasons, for
// the model only (it may quote values).
func (l *ladder) errorText(c validate.ToolCall, v validate.CallReport) string {
	if v.Worst() == validate.ClassName {
		names := make([]string, 0, l.input.Effective.Len())
		for _, t := range l.input.Effective.Tools() {
			if t.Name != l.settings.AbstainTool {
				names = append(names, t.Name)
			}
		}
		return CorrectionMessage(c.Name, names)
	}
	var b strings.Builder
	b.WriteString("Error: this call was rejected and not executed. Fix these problems and call the tool again:\n")
	for _, f := range v.Findings {
		if !f.Blocking() {
			continue
		}
		b.WriteString("- ")
		b.WriteString(f.Detail)
		b.WriteByte('\n')
	}
	return b.String()
}

func findingText(fs []validate.Finding) string {
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		parts = append(parts, f.Detail)
	}
	return strings.Join(parts, "; ")
}

func (l *ladder) ask(ctx context.Context, q *Query) (*Turn, error) {
	t, err := l.input.Ask.Ask(ctx, q)
	if t != nil {
		l.result.Turns = append(l.result.Turns, t)
	}
	return t, err
}

// upstreamFailed turns a failed re-query into the right result: the client's
// own cancellation aborts, a spent deadline escalates, a retryable provider
// failure goes back to the client as is, anything else escalates. A timeout
// inside an UpstreamError while ctx is still live is the provider's own
// (a first-byte or idle timeout), which the client's SDK retries; only ctx
// running out is the recovery deadline.
func (l *ladder) upstreamFailed(ctx context.Context, err error) (rung, error) {
	var ue *UpstreamError
	isUpstream := errors.As(err, &ue)
	switch {
	case errors.Is(err, context.Canceled):
		return rung{end: true}, ErrCanceled
	case errors.Is(err, context.DeadlineExceeded) && (ctx.Err() != nil || !isUpstream):
		return l.escalate(ReasonDeadline, "the recovery deadline passed", -1), nil
	case isUpstream && ue.Retryable:
		return rung{end: true, upstream: ue}, nil
	}
	a := Attempt{Kind: "upstream_error"}
	if ue != nil {
		a.Status = ue.Status
	}
	l.attempts = append(l.attempts, a)
	return l.escalate(l.primaryCode(l.badPositions(validate.ClassName, validate.ClassArgs, validate.ClassFinal)),
		"the model could not be asked again", -1), nil
}

func (l *ladder) primaryCode(positions []int) string {
	for _, p := range positions {
		if cs := l.reports[p].Codes(); len(cs) > 0 {
			return string(cs[0])
		}
	}
	return "invalid_decision"
}

// escalate ends the ladder with an escalation. label is the metric reason;
// call is the position of a validated call to include, or -1.
func (l *ladder) escalate(label, reason string, call int) rung {
	e := &Escalation{
		ID:        NewEscalationID(),
		Reason:    reason,
		Label:     label,
		CallIndex: call,
		Time:      time.Now(),
	}
	seen := map[string]bool{}
	add := func(c string) {
		if !seen[c] {
			seen[c] = true
			e.Codes = append(e.Codes, c)
		}
	}
	for _, v := range l.reports {
		for _, f := range v.Findings {
			if f.Blocking() {
				add(string(f.Code))
			}
		}
	}
	for _, v := range l.result.Reports {
		for _, f := range v.Findings {
			if f.Blocking() {
				add(string(f.Code))
			}
		}
	}
	// The label leads the list, so the error's top-level code (Code) is
	// always the reason the metrics count, finding code or not.
	if len(e.Codes) == 0 || e.Codes[0] != label {
		rest := make([]string, 0, len(e.Codes))
		for _, c := range e.Codes {
			if c != label {
				rest = append(rest, c)
			}
		}
		e.Codes = append([]string{label}, rest...)
	}
	if len(l.attempts) == 0 {
		for i, c := range l.input.Turn.Calls {
			if len(l.result.Reports[i].Findings) > 0 || call == i {
				l.attempts = append(l.attempts, callAttempt("call", c, l.reports[i].Findings))
			}
		}
	}
	e.Attempts = l.attempts
	if l.settings.Shadow {
		return rung{end: true, outcome: ShadowWouldEscalate, escalation: e}
	}
	return rung{end: true, outcome: Escalated, escalation: e}
}

func callAttempt(kind string, c validate.ToolCall, fs []validate.Finding) Attempt {
	raw := string(c.Args)
	return Attempt{Kind: kind, Tool: c.Name, Arguments: objectOrNil(c.Args), ArgumentsRaw: &raw,
		Findings: append([]validate.Finding(nil), fs...)}
}

// objectOrNil returns the arguments as a JSON value when they are a valid
// JSON object, so the escalation carries them structured; otherwise the raw
// text alone says what the model sent.
func objectOrNil(b []byte) json.RawMessage {
	t := bytes.TrimSpace(b)
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return json.RawMessage(t)
	}
	return nil
}

// abstention reports whether a call of turn takes the abstain exit, which
// exists only when it was injected into this request, and gives its reason.
func (l *ladder) abstention(turn *Turn) (string, bool) {
	if l.settings.AbstainTool == "" || l.settings.Shadow {
		return "", false
	}
	for _, c := range turn.Calls {
		if c.Name == l.settings.AbstainTool && c.Kind == validate.Function {
			return abstainReason(c.Args), true
		}
	}
	return "", false
}

func abstainReason(args []byte) string {
	var v struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(args, &v) != nil || strings.TrimSpace(v.Reason) == "" {
		return "No available tool fits this request."
	}
	return v.Reason
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// NewEscalationID returns a fresh, unguessable escalation id.
func NewEscalationID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "esc_" + hex.EncodeToString(b[:])
}
