package mcp

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
)

// A stateless client is asked to confirm a call through an input request
// (multi-round-trip): toolgate answers the call with an input_required
// result carrying one elicitation and a requestState it signs, and the
// client sends the same call again with the person's answer and that
// state. Nothing is kept between the two: the state binds the call and an
// expiry, and any replica that holds the same key takes the retry.

// confirmInput is the id of toolgate's input request in inputRequests and
// the client's inputResponses.
const confirmInput = "toolgate/confirm"

// statePrefix marks a requestState toolgate signed; any other state is the
// server's own and passes to it.
const statePrefix = "toolgate1."

// Kinds of state toolgate signs.
const (
	// stateAsk: toolgate asked a person; the retry carries the answer.
	stateAsk = "ask"
	// stateConfirmed: a confirmed call whose server asked for more input;
	// its own state is inside and the retry runs without asking again.
	stateConfirmed = "ok"
)

// signedState is what a requestState of toolgate's binds.
type signedState struct {
	Kind string `json:"k"`
	// Call is the digest of the server, the tool and its canonical
	// arguments.
	Call string `json:"c"`
	// Expires is a Unix time in milliseconds.
	Expires int64 `json:"e"`
	// Nonce makes an ask's state single-use.
	Nonce string `json:"n,omitempty"`
	// State and Responses are the server's own requestState and the
	// client's other inputResponses of the call toolgate held, given back
	// to the server with the confirmed call.
	State     string          `json:"s,omitempty"`
	Responses json.RawMessage `json:"r,omitempty"`
}

// Why a retry's state releases nothing (data.code of the refusal).
var (
	errStateTampered = errors.New("state_tampered")
	errStateExpired  = errors.New("state_expired")
	errStateMismatch = errors.New("state_mismatch")
	errStateUsed     = errors.New("state_used")
)

// stateKeyFor derives the signing key from configured secret material:
// catalog.mcp.state_secret_env, else the approvals admin token, else a key
// of this process, which only this replica then accepts.
func stateKeyFor(secret, adminToken string, process []byte) []byte {
	material := process
	switch {
	case secret != "":
		material = []byte(secret)
	case adminToken != "":
		material = []byte(adminToken)
	}
	mac := hmac.New(sha256.New, material)
	mac.Write([]byte("toolgate mcp requestState v1"))
	return mac.Sum(nil)
}

func sealState(key []byte, s signedState) string {
	payload, _ := json.Marshal(s)
	mac := hmac.New(sha256.New, key)
	mac.Write(payload)
	enc := base64.RawURLEncoding
	return statePrefix + enc.EncodeToString(payload) + "." + enc.EncodeToString(mac.Sum(nil))
}

// openState checks a state's signature, expiry and call. A state toolgate
// did not sign, or signed for other arguments, is refused: its bytes are
// the client's to change, not toolgate's promise.
func openState(key []byte, text, call string, now time.Time) (signedState, error) {
	var s signedState
	rest, ok := strings.CutPrefix(text, statePrefix)
	if !ok {
		return s, errStateTampered
	}
	body, sig, ok := strings.Cut(rest, ".")
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(body)
	got, err2 := enc.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil {
		return s, errStateTampered
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(payload)
	if !hmac.Equal(got, mac.Sum(nil)) || json.Unmarshal(payload, &s) != nil {
		return s, errStateTampered
	}
	switch {
	case s.Call != call:
		return s, errStateMismatch
	case now.UnixMilli() > s.Expires:
		return s, errStateExpired
	}
	return s, nil
}

// usedStates remembers the nonces of asks already answered until they
// expire, so one yes runs one call at this replica.
type usedStates struct {
	mu   sync.Mutex
	seen map[string]int64
}

// maxUsed bounds the nonces remembered; past it the oldest expiries go.
const maxUsed = 1 << 16

// claim reports whether nonce was unused, and marks it used.
func (u *usedStates) claim(nonce string, expires int64, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen == nil {
		u.seen = map[string]int64{}
	}
	if _, dup := u.seen[nonce]; dup {
		return false
	}
	if len(u.seen) >= maxUsed {
		for n, e := range u.seen {
			if e < now.UnixMilli() || len(u.seen) >= maxUsed {
				delete(u.seen, n)
			}
		}
	}
	u.seen[nonce] = expires
	return true
}

// useState marks an ask's state used, in the approvals store when there is
// one, so that a replay to any replica sharing it is refused until the
// state expires; without one, at this replica. The state's digest is its
// nonce's and call's, which its signature covers: another encoding of the
// same signed bytes is the same state.
func (g *Gateway) useState(ctx context.Context, s *signedState, now time.Time) (bool, error) {
	if g.deps.Approvals == nil {
		return g.used.claim(s.Nonce, s.Expires, now), nil
	}
	sum := sha256.Sum256([]byte(s.Nonce + "\x00" + s.Call))
	ttl := time.UnixMilli(s.Expires).Sub(now) + time.Millisecond
	// A client gone mid-call must not leave the mark half-made.
	return g.deps.Approvals.UseOnce(context.WithoutCancel(ctx), "mcp-state:"+base64.RawURLEncoding.EncodeToString(sum[:]), ttl)
}

// callDigest binds a call to this server, its tool and its canonical
// arguments.
func (cr *clientRequest) callDigest(name string, args []byte) (string, error) {
	d, err := approval.CallDigest(name, args)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(cr.rt.cfg.Name + "\x00" + d))
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// retryState reads a stateless call's requestState when it is toolgate's.
// It answers the refusal itself when the state does not hold.
func (cr *clientRequest) retryState(m *message, name string, args []byte) (*signedState, []byte) {
	p, _ := jsonx.ParseObject(m.params)
	text, _ := jsonx.Unquote(p.Get("requestState"))
	if !strings.HasPrefix(text, statePrefix) {
		return nil, nil
	}
	d, err := cr.callDigest(name, args)
	if err != nil {
		return nil, cr.refuseState(m, errStateMismatch)
	}
	s, err := openState(cr.rt.stateKey, text, d, time.Now())
	if err != nil {
		return nil, cr.refuseState(m, err)
	}
	return &s, nil
}

// refuseState answers a retry whose state releases nothing.
func (cr *clientRequest) refuseState(m *message, why error) []byte {
	cr.outcome = outcomeInvalid
	what := map[error]string{errStateTampered: "was not signed by toolgate or was changed", errStateExpired: "has expired",
		errStateMismatch: "was given for another call", errStateUsed: "was used already"}[why]
	return jsonrpc.ErrorResponse(m.id, jsonrpc.CodeInvalidParams, "Invalid params: the requestState "+what+"; call the tool again without it",
		map[string]any{"code": why.Error()})
}

// confirmStateless asks a stateless client's person through an input
// request, or releases the call the person's answer confirms.
func (cr *clientRequest) confirmStateless(h *held) {
	if h.state != nil {
		cr.answerInput(h)
		return
	}
	if !declaresElicitationCaps(cr.capabilities) {
		cr.writeJSON(http.StatusOK, cr.holdUnconfirmed(h, "this client did not declare the elicitation capability, so toolgate cannot ask a person to confirm the call"))
		return
	}
	d, err := cr.callDigest(h.name, h.args)
	if err != nil {
		cr.writeJSON(http.StatusOK, cr.refuseUnconfirmed(h, "toolgate could not read the call's arguments to ask about them"))
		return
	}
	p, _ := jsonx.ParseObject(h.m.params)
	own, _ := jsonx.Unquote(p.Get("requestState"))
	s := signedState{Kind: stateAsk, Call: d, Nonce: randomHex(),
		Expires: time.Now().Add(cr.rt.snap.Config.Catalog.MCP.ConfirmTimeout.D()).UnixMilli(), State: own, Responses: p.Get("inputResponses")}
	q := cr.question(h)
	q["mode"] = "form"
	cr.outcome = outcomeInputRequired
	cr.writeJSON(http.StatusOK, jsonrpc.Response(h.m.id, map[string]any{
		"resultType":    "input_required",
		"inputRequests": map[string]any{confirmInput: map[string]any{"method": "elicitation/create", "params": q}},
		"requestState":  sealState(cr.rt.stateKey, s),
	}))
}

// answerInput reads the retry of a call toolgate asked about: a yes runs
// it once, anything else is an error result. A confirmed call the server
// asked more of runs on without asking again.
func (cr *clientRequest) answerInput(h *held) {
	s := h.state
	p, _ := jsonx.ParseObject(h.m.params)
	if s.Kind == stateConfirmed {
		cr.forwardReleased(h, s.State, p.Get("inputResponses"))
		return
	}
	fresh, err := cr.rt.gateway.useState(cr.ctx, s, time.Now())
	if err != nil {
		cr.log().Warn("approval store failed; the confirmed call was not run", zap.Error(err))
		cr.outcome = outcomeUpstreamError
		cr.writeJSON(http.StatusOK, cr.failure(h.m.id, storeFailure("the approval store cannot be reached to record the confirmation's use; the call was not run, retry it")))
		return
	}
	if !fresh {
		cr.writeJSON(http.StatusOK, cr.refuseState(h.m, errStateUsed))
		return
	}
	responses, _ := jsonx.ParseObject(p.Get("inputResponses"))
	if !accepted(responses.Get(confirmInput)) {
		cr.writeJSON(http.StatusOK, cr.refuseUnconfirmed(h, "the person declined the call"))
		return
	}
	cr.outcome = outcomeConfirmed
	cr.forwardReleased(h, s.State, s.Responses)
}

// forwardReleased forwards a confirmed call with the server's own state
// and input responses in place of toolgate's, and marks it so that the
// server's own input_required answer keeps it confirmed.
func (cr *clientRequest) forwardReleased(h *held, state string, responses []byte) {
	msg := *h.m
	msg.raw = withParams(h.m.raw, func(p jsonx.Object) jsonx.Object {
		p = p.Delete("requestState").Delete("inputResponses")
		if state != "" {
			b, _ := json.Marshal(state)
			p = p.Set("requestState", b)
		}
		if len(responses) > 0 {
			p = p.Set("inputResponses", responses)
		}
		return p
	})
	cr.trackCall(&msg, h.call.Set, h.name)
	if t, ok := cr.tracked[msg.idKey()]; ok {
		t.confirmed, _ = cr.callDigest(h.name, h.args)
		cr.tracked[msg.idKey()] = t
	}
	cr.forward(msg.raw, []message{msg}, nil)
}

// withParams returns a message with its params edited by f; a message it
// cannot edit is returned as it is (parseBody read it already).
func withParams(raw []byte, f func(jsonx.Object) jsonx.Object) []byte {
	msg, err := jsonx.ParseObject(raw)
	if err != nil {
		return raw
	}
	p, err := jsonx.ParseObject(msg.Get("params"))
	if err != nil {
		return raw
	}
	return msg.Set("params", f(p).Bytes()).Bytes()
}

// keepConfirmed rewrites a confirmed call's input_required answer: the
// server's requestState goes inside one of toolgate's, so the client's
// retry is known confirmed and not asked about again.
func (cr *clientRequest) keepConfirmed(m *message, res jsonx.Object, t tracked) ([]byte, bool) {
	own, ok := jsonx.Unquote(res.Get("requestState"))
	if !ok && res.Get("requestState") != nil {
		return nil, false
	}
	s := signedState{Kind: stateConfirmed, Call: t.confirmed, State: own,
		Expires: time.Now().Add(cr.rt.snap.Config.Catalog.MCP.ConfirmTimeout.D()).UnixMilli()}
	b, _ := json.Marshal(sealState(cr.rt.stateKey, s))
	return replaceMember(m.raw, "result", res.Set("requestState", b).Bytes()), true
}

// inputRequired reports a result that asks the client for input rather
// than completing the call.
func inputRequired(res jsonx.Object) bool { return stringMember(res, "resultType") == "input_required" }

// randomKey is a fresh secret for a process without configured material.
func randomKey() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}
