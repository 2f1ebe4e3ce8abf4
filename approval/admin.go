package approval

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// View is a record as the admin API and notifications show it: the
// arguments redacted, the held answer and the secret's hash left out.
type View struct {
	ID       string   `json:"id"`
	State    State    `json:"state"`
	Approver Approver `json:"approver"`
	// Tool and Arguments repeat the call when there is one.
	Tool           string          `json:"tool,omitempty"`
	Arguments      json.RawMessage `json:"arguments,omitempty"`
	CallDigest     string          `json:"call_digest"`
	Calls          []HeldCall      `json:"calls"`
	RequestDigest  string          `json:"request_digest"`
	Route          string          `json:"route"`
	Upstream       string          `json:"upstream"`
	CatalogVersion string          `json:"catalog_version"`
	EscalationID   string          `json:"escalation_id"`
	Created        time.Time       `json:"created"`
	ExpiresAt      time.Time       `json:"expires_at"`
	// LastUserMessage and AskedBy (the caller's digest, Record.Caller)
	// help the person deciding; a notification leaves the message out.
	LastUserMessage string    `json:"last_user_message,omitempty"`
	AskedBy         string    `json:"asked_by,omitempty"`
	DecidedBy       string    `json:"decided_by,omitempty"`
	DecidedAt       time.Time `json:"decided_at,omitzero"`
	Note            string    `json:"note,omitempty"`
	ReleasedAt      time.Time `json:"released_at,omitzero"`
}

func (s *Service) view(r *Record) View {
	v := View{
		ID: r.ID, State: r.State, Approver: r.Approver, CallDigest: r.CallDigest(),
		RequestDigest: r.RequestDigest, Route: r.Route, Upstream: r.Upstream,
		CatalogVersion: r.CatalogVersion, EscalationID: r.EscalationID,
		Created: r.Created, ExpiresAt: r.ExpiresAt, DecidedBy: r.DecidedBy, DecidedAt: r.DecidedAt,
		Note: r.Note, ReleasedAt: r.ReleasedAt, Calls: make([]HeldCall, len(r.Calls)),
		LastUserMessage: r.UserText, AskedBy: r.Caller,
	}
	var hidden []string
	for i, c := range r.Calls {
		if s.cfg.Redact != nil {
			red := s.cfg.Redact(c.Tool, c.Arguments)
			hidden = appendHidden(hidden, c.Arguments, red)
			c.Arguments = red
		}
		v.Calls[i] = c
	}
	v.LastUserMessage = maskValues(v.LastUserMessage, hidden)
	if len(v.Calls) == 1 {
		v.Tool, v.Arguments = v.Calls[0].Tool, v.Calls[0].Arguments
	}
	return v
}

// Admin API bounds.
const (
	// MaxBodyBytes caps a decision body: a decision, a name and a note.
	MaxBodyBytes = 16 << 10
	maxBy        = 128
	maxNote      = 2000
)

// NamedToken is an admin token whose decisions are recorded under its
// name (approvals.admin_tokens_env).
type NamedToken struct {
	Name  string
	Token string
}

// Tokens are who may use the admin API and the page: the admin token,
// whose decisions record the body's "by", and named tokens, whose
// decisions record their name whatever the body says. None at all leaves
// the API open (a loopback admin listener) and the page closed.
type Tokens struct {
	Admin string
	Named []NamedToken
}

// adminName is decided_by for a decision made on the page with the
// unnamed admin token, which has no name of its own to record.
const adminName = "admin"

// acceptedToken is one accepted token: its digest, compared in constant
// time, and the name its decisions are recorded under ("" for the admin
// token).
type acceptedToken struct {
	digest [sha256.Size]byte
	name   string
	named  bool
	// session signs the page's cookies and CSRF tokens for this token,
	// so every replica with the same token accepts them and removing the
	// token ends its sessions.
	session []byte
}

type tokenSet []acceptedToken

func newTokenSet(t Tokens) tokenSet {
	var ks tokenSet
	add := func(tok, name string, named bool) {
		m := hmac.New(sha256.New, []byte(tok))
		m.Write([]byte("toolgate approvals page session v1"))
		ks = append(ks, acceptedToken{digest: sha256.Sum256([]byte(tok)), name: name, named: named, session: m.Sum(nil)})
	}
	if t.Admin != "" {
		add(t.Admin, "", false)
	}
	for _, n := range t.Named {
		add(n.Token, n.Name, true)
	}
	return ks
}

// match finds the token presented, comparing against every one so the
// time says nothing about which matched.
func (ks tokenSet) match(tok string) (acceptedToken, bool) {
	sum := sha256.Sum256([]byte(tok))
	found := -1
	for i := range ks {
		if subtle.ConstantTimeCompare(sum[:], ks[i].digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return acceptedToken{}, false
	}
	return ks[found], true
}

// byName finds a token by the name a session cookie carries.
func (ks tokenSet) byName(named bool, name string) (acceptedToken, bool) {
	for _, k := range ks {
		if k.named == named && k.name == name {
			return k, true
		}
	}
	return acceptedToken{}, false
}

type ctxKey struct{}

// Handler is the admin API (docs/approvals.md, "Admin API"), mounted on the admin
// listener:
//
//	GET  /approvals?state=pending   list
//	GET  /approvals/{id}            one
//	POST /approvals/{id}            {"decision":"approve"|"deny","by":"…","note":"…"}
//
// and the page for people (page.go) under /ui/. With tokens, every API
// request needs "Authorization: Bearer <token>": the list shows
// arguments, and a decision releases a held call.
func (s *Service) Handler(t Tokens) http.Handler {
	ks := newTokenSet(t)
	api := http.NewServeMux()
	api.HandleFunc("GET /approvals", s.list)
	api.HandleFunc("GET /approvals/{id}", s.show)
	api.HandleFunc("POST /approvals/{id}", s.decide)
	api.HandleFunc("GET /pins", s.pinList)
	api.HandleFunc("POST /pins/{server}/{tool}", s.pinDecide)
	guarded := http.Handler(api)
	if len(ks) > 0 {
		guarded = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, ok := bearer(r.Header.Get("Authorization"))
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate approvals"`)
				apiError(w, http.StatusUnauthorized, "unauthorized", "send Authorization: Bearer <token> (an approvals admin token)")
				return
			}
			k, ok := ks.match(got)
			if !ok {
				apiError(w, http.StatusForbidden, "forbidden", "the bearer token is not an approvals admin token")
				return
			}
			api.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, k)))
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/approvals", guarded)
	mux.Handle("/approvals/", guarded)
	mux.Handle("/pins", guarded)
	mux.Handle("/pins/", guarded)
	s.page(mux, ks)
	return mux
}

func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

type apiErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func apiError(w http.ResponseWriter, status int, code, msg string) {
	var b apiErrorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"the answer could not be encoded"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// storeError answers a store's error: a refusal with its status, an
// unreachable store with a retryable 503.
func storeError(w http.ResponseWriter, err error) {
	if rf, ok := AsRefusal(err); ok {
		msg := map[RefusalCode]string{
			CodeUnknown: "no such approval (never held here, or removed after it expired)",
			CodeExpired: "the approval expired before it was decided",
			CodeDecided: "the approval was already decided; it is " + string(rf.State),
		}[rf.Code]
		apiError(w, rf.Status(), string(rf.Code), msg)
		return
	}
	if errors.Is(err, ErrUnavailable) {
		w.Header().Set("Retry-After", "1")
		apiError(w, http.StatusServiceUnavailable, "store_unavailable", "the approval store cannot be reached; nothing was changed, try again")
		return
	}
	apiError(w, http.StatusInternalServerError, "internal", "the approval could not be read")
}

func (s *Service) list(w http.ResponseWriter, r *http.Request) {
	var st State
	if q := r.URL.Query().Get("state"); q != "" {
		var ok bool
		if st, ok = ParseState(q); !ok {
			apiError(w, http.StatusBadRequest, "bad_state", fmt.Sprintf("state %q is not one of pending, approved, denied, expired, released", q))
			return
		}
	}
	recs, err := s.cfg.Store.List(r.Context(), st)
	if err != nil {
		storeError(w, err)
		return
	}
	out := struct {
		Approvals []View `json:"approvals"`
	}{Approvals: make([]View, 0, len(recs))}
	for _, rec := range recs {
		out.Approvals = append(out.Approvals, s.view(rec))
	}
	writeJSON(w, http.StatusOK, out)
}

// pathID reads the {id} segment, answering 400 for what cannot be an id.
func pathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, err := ParseID(r.PathValue("id"))
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_id", err.Error())
		return "", false
	}
	return id, true
}

func (s *Service) show(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	rec, err := s.cfg.Store.Get(r.Context(), id)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(rec))
}

func (s *Service) decide(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	d, status, msg := readDecision(w, r)
	if k, ok := r.Context().Value(ctxKey{}).(acceptedToken); ok && k.named && status == 0 {
		d.By = k.name
	} else if status == 0 && d.By == "" {
		status, msg = http.StatusBadRequest, `"by" is required: who decides (a name or an id)`
	}
	if status != 0 {
		code := map[int]string{http.StatusRequestEntityTooLarge: "too_large", http.StatusUnsupportedMediaType: "unsupported_media_type"}[status]
		if code == "" {
			code = "bad_request"
		}
		apiError(w, status, code, msg)
		return
	}
	rec, err := s.Decide(r.Context(), id, d)
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.view(rec))
}

// DecisionBody is the POST body.
type DecisionBody struct {
	Decision string `json:"decision"`
	By       string `json:"by"`
	Note     string `json:"note"`
}

const bodyHint = `send {"decision":"approve"|"deny","by":"<who>","note":"<optional>"}`

// readDecision reads and checks a POST body; a non-zero status says what
// is wrong with it.
func readDecision(w http.ResponseWriter, r *http.Request) (Decision, int, string) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return Decision{}, http.StatusUnsupportedMediaType, "Content-Type must be application/json"
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return Decision{}, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes; %s", MaxBodyBytes, bodyHint)
		}
		return Decision{}, http.StatusBadRequest, "the body could not be read"
	}
	return ParseDecision(body)
}

// ParseDecision checks a decision body: one JSON object with a known
// decision, an optional printable "by" (required by the API unless a
// named token says who) and an optional note, nothing else, no member
// twice.
func ParseDecision(body []byte) (Decision, int, string) {
	if len(bytes.TrimSpace(body)) == 0 {
		return Decision{}, http.StatusBadRequest, "the body is empty; " + bodyHint
	}
	var b DecisionBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return Decision{}, http.StatusBadRequest, "the body is not a decision object (" + err.Error() + "); " + bodyHint
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Decision{}, http.StatusBadRequest, "the body has more than one JSON value; " + bodyHint
	}
	// Parsers disagree on which of two same-named members counts: a
	// decision must mean one thing, so none is taken.
	if _, err := Canonical(body); err != nil {
		return Decision{}, http.StatusBadRequest, "the body gives a member twice (" +
			strings.TrimPrefix(err.Error(), "approval: canonical JSON: ") + "); nothing was decided"
	}
	// encoding/json matches member names regardless of case: "Decision"
	// beside "decision" would be the same member twice.
	var names map[string]json.RawMessage
	if err := json.Unmarshal(body, &names); err != nil {
		return Decision{}, http.StatusBadRequest, "the body is not a decision object; " + bodyHint
	}
	for n := range names {
		if n != "decision" && n != "by" && n != "note" {
			return Decision{}, http.StatusBadRequest, fmt.Sprintf("the body has a member %q; %s", n, bodyHint)
		}
	}
	var d Decision
	switch b.Decision {
	case "approve":
		d.Approve = true
	case "deny":
	default:
		return Decision{}, http.StatusBadRequest, fmt.Sprintf(`decision %q is not "approve" or "deny"`, b.Decision)
	}
	if b.By != "" && strings.TrimSpace(b.By) == "" {
		return Decision{}, http.StatusBadRequest, `"by" is blank: who decides (a name or an id)`
	}
	if msg := textProblem("by", b.By, maxBy, false); msg != "" {
		return Decision{}, http.StatusBadRequest, msg
	}
	if msg := textProblem("note", b.Note, maxNote, true); msg != "" {
		return Decision{}, http.StatusBadRequest, msg
	}
	d.By, d.Note = strings.TrimSpace(b.By), b.Note
	return d, 0, ""
}

// textProblem checks a free-text field that ends up in logs and sinks:
// valid UTF-8, bounded, and no control characters that could forge a log
// line (a note may have line breaks and tabs).
func textProblem(field, v string, limit int, multiline bool) string {
	switch {
	case !utf8.ValidString(v):
		return fmt.Sprintf("%q is not valid UTF-8", field)
	case utf8.RuneCountInString(v) > limit:
		return fmt.Sprintf("%q is longer than %d characters", field, limit)
	}
	for _, c := range v {
		if unicode.IsControl(c) && !(multiline && (c == '\n' || c == '\t')) {
			return fmt.Sprintf("%q contains a control character", field)
		}
	}
	return ""
}
