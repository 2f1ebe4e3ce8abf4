// Package recovery runs the bounded ladder of docs/recovery.md: pass a valid answer,
// repair a bad one by asking the model again, or escalate. It is provider
// neutral: it sees neutral Turns and asks the upstream through the Asker that
// each API codec implements, so it is tested without HTTP.
package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/validate"
)

// Turn is one assistant answer (one choice) in neutral form.
type Turn = neutral.Turn

// Usage counts the tokens of one upstream call.
type Usage = neutral.Usage

// CallReply answers one call of a replayed turn.
type CallReply = neutral.CallReply

// Round is one round of a re-query's history: a replayed assistant turn
// followed by a reply to each of its calls, in the turn's order.
type Round = neutral.Round

// QueryKind says why the upstream is asked again; it labels metrics.
type QueryKind = neutral.QueryKind

// Query kinds.
const (
	KindOriginal = neutral.KindOriginal
	KindRecovery = neutral.KindRecovery
	KindReprompt = neutral.KindReprompt
)

// Query is one re-query: the original request with History appended.
type Query = neutral.Query

// Asker sends a re-query in its API's wire shape and decodes the answer.
// Implementations return *UpstreamError for a non-success status.
type Asker interface {
	Ask(ctx context.Context, q *Query) (*Turn, error)
}

// UpstreamError is a re-query the provider did not answer with success.
type UpstreamError struct {
	Status int
	// Header and Body are the failed answer as the Asker read it, which
	// the caller relays to the client when the failure is handed back.
	// Recovery never looks inside; Header is an HTTP header map, kept as
	// its plain type so that recovery stays apart from net/http.
	Header map[string][]string
	Body   []byte
	// Err is set for transport failures (timeouts, resets) with no status.
	Err error
	// Retryable is set by the Asker, which classifies the failure: the
	// client's SDK would retry the whole request, so it is handed back as
	// it is instead of escalated.
	Retryable bool
}

func (e *UpstreamError) Error() string {
	if e.Err != nil {
		return "upstream: " + e.Err.Error()
	}
	return fmt.Sprintf("upstream: status %d", e.Status)
}

func (e *UpstreamError) Unwrap() error { return e.Err }

// ErrBadAnswer wraps a re-query answer the codec could not decode.
var ErrBadAnswer = errors.New("the upstream answer could not be read")

// Outcome is what happened to one answer; it is the X-Toolgate-Outcome value.
type Outcome string

// Outcomes, as X-Toolgate-Outcome names them (docs/routes.md, "Headers").
const (
	Pass        Outcome = "pass"
	Substituted Outcome = "substituted"
	Corrected   Outcome = "corrected"
	Reprompted  Outcome = "reprompted"
	Abstained   Outcome = "abstained"
	Escalated   Outcome = "escalated"

	ShadowPass          Outcome = "shadow-pass"
	ShadowWouldRecover  Outcome = "shadow-would-recover"
	ShadowWouldReprompt Outcome = "shadow-would-reprompt"
	ShadowWouldEscalate Outcome = "shadow-would-escalate"
)

// rank orders outcomes so that a request with several choices reports the
// most significant one.
func (o Outcome) rank() int {
	switch o {
	case Pass, ShadowPass:
		return 0
	case Substituted:
		return 1
	case Corrected:
		return 2
	case Reprompted, ShadowWouldRecover, ShadowWouldReprompt:
		return 3
	case Abstained:
		return 4
	case Escalated, ShadowWouldEscalate:
		return 5
	}
	return 0
}

// Worse returns the more significant of two outcomes.
func Worse(a, b Outcome) Outcome {
	if b.rank() > a.rank() {
		return b
	}
	return a
}

// Reasons an escalation has when no finding names it. With the finding
// codes they are the closed set of Escalation.Label values, the
// toolgate_escalations_total reason.
const (
	// ReasonInvalidDecision: the model's answer to the recovery prompt was
	// not a decision toolgate can act on.
	ReasonInvalidDecision = "invalid_decision"
	// ReasonBudget: the recovery or reprompt attempts are spent.
	ReasonBudget = "budget"
	// ReasonDeadline: the recovery deadline passed.
	ReasonDeadline = "deadline"
	// ReasonStateful: the conversation is stored upstream, so a call cannot
	// be repaired without changing what the client was given.
	ReasonStateful = "stateful_unrecoverable"
	// ReasonNoTools: the model called a tool where none may be called.
	ReasonNoTools = "no_tools_offered"
)

// Escalation is the structured record a caller acts on (docs/escalations.md).
type Escalation struct {
	ID                 string          `json:"id"`
	Codes              []string        `json:"codes"`
	Reason             string          `json:"reason"`
	OriginalIntent     string          `json:"original_intent"`
	MissingCapability  string          `json:"missing_capability"`
	CatalogVersion     string          `json:"catalog_version"`
	RequestID          string          `json:"request_id"`
	UpstreamRequestIDs []string        `json:"upstream_request_ids"`
	Call               json.RawMessage `json:"call"`
	Attempts           []Attempt       `json:"attempts"`

	// Label is the escalations_total reason: a finding code, or one of
	// invalid_decision, budget, deadline, stateful_unrecoverable,
	// no_tools_offered.
	Label string `json:"-"`
	// CallIndex is the position of the call that Call holds, or -1.
	CallIndex int `json:"-"`
	// Time is when the escalation was decided.
	Time time.Time `json:"-"`
}

// Code is the primary code, the error's top-level "code".
func (e *Escalation) Code() string {
	if len(e.Codes) > 0 {
		return e.Codes[0]
	}
	return e.Label
}

// Attempt is one step that led to an escalation.
type Attempt struct {
	// Kind is call, decision, correction, reprompt or upstream_error.
	Kind         string             `json:"kind"`
	Tool         string             `json:"tool,omitempty"`
	Arguments    json.RawMessage    `json:"arguments,omitempty"`
	ArgumentsRaw *string            `json:"arguments_raw,omitempty"`
	Findings     []validate.Finding `json:"findings,omitempty"`
	Decision     string             `json:"decision,omitempty"`
	Confidence   *float64           `json:"confidence,omitempty"`
	Status       int                `json:"status,omitempty"`
}

// Event is one recovery step, for metrics and the audit log.
type Event struct {
	Strategy string
	// Result is substituted, corrected, reprompted, escalated,
	// invalid_decision or upstream_error.
	Result string
	// Name is the invented tool name (decision and correction).
	Name string
	// ArgsBytes is the size of the invented call's arguments.
	ArgsBytes int
	// Suggested is the tool the model proposed, if any.
	Suggested string
	// Confidence is the decision's confidence, or -1.
	Confidence float64
	Duration   time.Duration
}
