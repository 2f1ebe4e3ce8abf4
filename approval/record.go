// Package approval holds a call a person must say yes to, and lets it through
// once when they have (docs/approvals.md): the record of a held answer, its
// canonical digests, the stores that keep it (memory, a bbolt file, redis
// shared by replicas), the admin API a person decides through, the
// notification of each new pending approval and the approval metrics.
//
// It is provider-neutral: what it holds of the answer is opaque bytes the
// route's codec wrote, and the pipeline that holds and resumes calls is its
// caller.
package approval

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// State is where an approval stands.
type State string

// States. Pending and approved are live until expires_at; the others are
// final.
const (
	Pending  State = "pending"
	Approved State = "approved"
	Denied   State = "denied"
	Expired  State = "expired"
	Released State = "released"
)

// ParseState reads a state name as the admin API takes it.
func ParseState(s string) (State, bool) {
	switch st := State(s); st {
	case Pending, Approved, Denied, Expired, Released:
		return st, true
	}
	return "", false
}

// Approver says who may say yes (the tool's `approver`).
type Approver string

// Approvers.
const (
	// Operator decides through the admin API.
	Operator Approver = "operator"
	// Caller asked its own user: presenting the secret is the approval.
	Caller Approver = "caller"
)

// HeldCall is one call of the held answer, as judged.
type HeldCall struct {
	Tool string `json:"tool"`
	// Arguments are the call's arguments in canonical form.
	Arguments json.RawMessage `json:"arguments"`
	Digest    string          `json:"digest"`
}

// NewCall canonicalizes a call's arguments and computes its digest.
func NewCall(tool string, args []byte) (HeldCall, error) {
	c, err := CanonicalCall(tool, args)
	if err != nil {
		return HeldCall{}, err
	}
	var parts struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return HeldCall{}, err
	}
	return HeldCall{Tool: tool, Arguments: parts.Arguments, Digest: Digest(c)}, nil
}

// Record is one held answer and the decision about it.
type Record struct {
	ID       string   `json:"id"`
	State    State    `json:"state"`
	Approver Approver `json:"approver"`
	// SecretHash is the SHA-256 of a caller approval's secret. The secret
	// itself is handed to the caller once and never stored.
	SecretHash []byte    `json:"secret_hash,omitempty"`
	Created    time.Time `json:"created"`
	ExpiresAt  time.Time `json:"expires_at"`

	RequestDigest string `json:"request_digest"`
	Route         string `json:"route"`
	Upstream      string `json:"upstream"`
	// Caller is the digest of who made the hold (Binding.Digest): only the
	// same caller may resume it. Empty when nothing names the caller.
	Caller         string     `json:"caller,omitempty"`
	CatalogVersion string     `json:"catalog_version"`
	EscalationID   string     `json:"escalation_id"`
	Calls          []HeldCall `json:"calls"`
	// UserText is the conversation's last user message, for the person
	// deciding; it is shown on the page and the admin API, never logged
	// or sent to sinks or notifications.
	UserText string `json:"user_text,omitempty"`
	// Held is what is released on resume: the upstream's answer bytes, or
	// a stream's held events, as the route's codec wrote them. It is
	// dropped once the record is final.
	Held []byte `json:"held,omitempty"`
	// Stream says Held is a stream's events rather than a whole answer.
	Stream bool `json:"stream,omitempty"`

	DecidedBy  string    `json:"decided_by,omitempty"`
	DecidedAt  time.Time `json:"decided_at,omitzero"`
	Note       string    `json:"note,omitempty"`
	ReleasedAt time.Time `json:"released_at,omitzero"`
}

// CallDigest is the approval's call digest: the one call's digest, or,
// for an answer with several calls, the digest of their digests in order.
func (r *Record) CallDigest() string {
	if len(r.Calls) == 1 {
		return r.Calls[0].Digest
	}
	ds := make([]string, len(r.Calls))
	for i, c := range r.Calls {
		ds[i] = c.Digest
	}
	return Digest([]byte(strings.Join(ds, "\n")))
}

// live reports whether the record can still be decided or released at now.
func (r *Record) live(now time.Time) bool {
	return (r.State == Pending || r.State == Approved) && now.Before(r.ExpiresAt)
}

// asOf returns the record as it reads at now: a live state past expires_at
// reads as expired.
func (r *Record) asOf(now time.Time) *Record {
	if (r.State == Pending || r.State == Approved) && !now.Before(r.ExpiresAt) {
		r.State = Expired
		r.Held = nil
	}
	return r
}

// Ticket is the approval object of an escalation (docs/approvals.md).
type Ticket struct {
	ID         string    `json:"id"`
	State      State     `json:"state"`
	ExpiresAt  time.Time `json:"expires_at"`
	CallDigest string    `json:"call_digest"`
	// Secret is set for approver: caller only. This is the one place the
	// secret is written out.
	Secret string `json:"secret,omitempty"`
}

// Ticket builds the escalation's approval object; secret is the one
// NewRecord returned (zero for an operator approval).
func (r *Record) Ticket(secret Secret) Ticket {
	return Ticket{ID: r.ID, State: r.State, ExpiresAt: r.ExpiresAt.UTC(), CallDigest: r.CallDigest(), Secret: secret.value}
}

// Secret is a caller approval's secret. It prints, logs and marshals as a
// placeholder; only Ticket writes its value.
type Secret struct{ value string }

const secretMask = "[secret]"

func (s Secret) String() string               { return secretMask }
func (s Secret) GoString() string             { return secretMask }
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(secretMask) }
func (s Secret) MarshalText() ([]byte, error) { return []byte(secretMask), nil }
func (s Secret) IsZero() bool                 { return s.value == "" }
func (s Secret) hash() []byte                 { h := sha256.Sum256([]byte(s.value)); return h[:] }
func (s Secret) matches(stored []byte) bool {
	return len(stored) == sha256.Size && subtle.ConstantTimeCompare(s.hash(), stored) == 1
}
func (s Secret) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(secretMask)) }

// SecretFrom wraps a secret a client presented (X-Toolgate-Approval-Secret).
func SecretFrom(v string) Secret { return Secret{value: v} }

// Identifiers and secrets are 128 random bits, hex.
const (
	idPrefix  = "apr_"
	randBytes = 16
)

func random() string {
	b := make([]byte, randBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// Binding is who presents a request: the inbound token it authenticated
// with and, on MCP, its session. An approval is bound to the caller that
// made the hold, since its id is no secret (it shows in logs, sink records,
// traces and notifications): another client repeating the request with it
// is refused.
type Binding struct {
	// Token is the client's inbound token; only its digest is kept.
	Token string
	// Session is the MCP session (Mcp-Session-Id).
	Session string
}

// Digest is what a record keeps of b: a digest of its parts, or "" when
// b names nobody. A token is never stored, only this.
func (b Binding) Digest() string {
	if b.Token == "" && b.Session == "" {
		return ""
	}
	h := sha256.New()
	for _, part := range [...]string{"toolgate caller", b.Token, b.Session} {
		// Each part's length first, so no two bindings read the same.
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(part))))
		h.Write([]byte(part))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// HeldAnswer is what the pipeline knows of a held answer when it asks
// for an approval.
type HeldAnswer struct {
	Approver       Approver
	RequestDigest  string
	Route          string
	Upstream       string
	Caller         string
	CatalogVersion string
	EscalationID   string
	Calls          []HeldCall
	Held           []byte
	Stream         bool
	UserText       string
}

// maxUserText bounds the user message a record keeps: enough to see what
// was asked, not a whole pasted document in every replica's store.
const maxUserText = 2000

// NewRecord makes a pending record from s, expiring ttl after now, and the
// secret for a caller approval (zero otherwise).
func NewRecord(s HeldAnswer, now time.Time, ttl time.Duration) (*Record, Secret) {
	r := &Record{
		ID: idPrefix + random(), State: Pending, Approver: s.Approver,
		Created: now.UTC(), ExpiresAt: now.Add(ttl).UTC(),
		RequestDigest: s.RequestDigest, Route: s.Route, Upstream: s.Upstream, Caller: s.Caller,
		CatalogVersion: s.CatalogVersion, EscalationID: s.EscalationID,
		Calls: s.Calls, Held: s.Held, Stream: s.Stream,
		UserText: truncateRunes(s.UserText, maxUserText),
	}
	if r.Approver == "" {
		r.Approver = Operator
	}
	var sec Secret
	if r.Approver == Caller {
		sec = Secret{value: random()}
		r.SecretHash = sec.hash()
	}
	return r, sec
}

// truncateRunes cuts s to at most n runes, marking the cut.
func truncateRunes(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// ParseID checks an X-Toolgate-Approval value: "apr_" and 32 lower-case
// hex digits, nothing around it. Anything else is no approval id at all.
func ParseID(v string) (string, error) {
	if len(v) != len(idPrefix)+2*randBytes || !strings.HasPrefix(v, idPrefix) || !lowerHex(v[len(idPrefix):]) {
		return "", errors.New(`approval id must be "apr_" and 32 lower-case hex digits`)
	}
	return v, nil
}

// ParseSecret checks an X-Toolgate-Approval-Secret value: 32 lower-case
// hex digits.
func ParseSecret(v string) (Secret, error) {
	if len(v) != 2*randBytes || !lowerHex(v) {
		return Secret{}, errors.New("approval secret must be 32 lower-case hex digits")
	}
	return Secret{value: v}, nil
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ErrUnavailable is a store that could not be reached. The call stays
// held; the client gets a retryable 503.
var ErrUnavailable = errors.New("approval store unavailable")

type unavailable struct{ err error }

func (u *unavailable) Error() string { return "approval store unavailable: " + u.err.Error() }
func (u *unavailable) Unwrap() []error {
	return []error{ErrUnavailable, u.err}
}

func unavailableErr(err error) error { return &unavailable{err: err} }

// RefusalCode is a refusal's code (docs/approvals.md, "Resume refusals").
type RefusalCode string

// Refusal codes.
const (
	CodePending  RefusalCode = "approval_pending"
	CodeDenied   RefusalCode = "approval_denied"
	CodeExpired  RefusalCode = "approval_expired"
	CodeUsed     RefusalCode = "approval_used"
	CodeMismatch RefusalCode = "approval_mismatch"
	CodeUnknown  RefusalCode = "approval_unknown"
	CodeStale    RefusalCode = "approval_stale"
	CodeSecret   RefusalCode = "approval_secret"
	// CodeDecided is the admin API's answer to a second decision.
	CodeDecided RefusalCode = "approval_decided"
)

// Refusal is why an approval cannot be released or decided.
type Refusal struct {
	Code RefusalCode
	// State is the record's state when it was refused, if it was found.
	State State
}

func (r *Refusal) Error() string { return "approval refused: " + string(r.Code) }

// Status is the HTTP status docs/approvals.md ("Resume refusals") gives the
// code.
func (r *Refusal) Status() int {
	switch r.Code {
	case CodeDenied, CodeSecret:
		return http.StatusForbidden
	case CodeExpired:
		return http.StatusGone
	case CodeUnknown:
		return http.StatusNotFound
	}
	return http.StatusConflict
}

func refuse(c RefusalCode, s State) error { return &Refusal{Code: c, State: s} }

// AsRefusal returns err's refusal, if it is one.
func AsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}
