package exchange

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// Approvals (docs/approvals.md) in the pipeline: an answer whose only finding is
// confirmation_required is held in the approval store instead of being
// thrown away, and the same request repeated with X-Toolgate-Approval
// releases it once a person said yes, without asking the model again.
// Codecs are not involved beyond their usual encodings: what is held is
// the bytes the client would have been sent.

// Resume headers. Both are toolgate's own, so they never go upstream.
const (
	headerApproval       = "X-Toolgate-Approval"
	headerApprovalSecret = "X-Toolgate-Approval-Secret"
)

// outcomeApproved is X-Toolgate-Outcome of a released answer.
const outcomeApproved = "approved"

// holdable reports an answer that can wait for a person: every choice
// either passes or escalates only because a valid call's tool needs
// confirming, and at least one does. The calls must be the model's own:
// a substitute a person never asked for is not held.
func (x *exchange) holdable(results []*recovery.Result, streamBegun bool) bool {
	if x.env.Approvals == nil || x.settings.Shadow || streamBegun {
		// A stream that has sent text cannot be replayed whole on resume:
		// its escalation stays what the config says.
		return false
	}
	return pipeline.ConfirmOnly(results)
}

// heldAnswer is the plain answer to release on approval.
func (x *exchange) heldAnswer(resp *neutral.Answer, results []*recovery.Result) ([]byte, error) {
	actions, changed := pipeline.ReleasedActions(results)
	if !changed {
		return resp.Body, nil
	}
	return x.codec.EncodeAnswer(resp, actions)
}

// heldStream is the stream to replay on approval: every event, since
// nothing was sent yet.
func (r *streamRun) heldStream(results []*recovery.Result) ([]byte, error) {
	actions, changed := pipeline.ReleasedActions(results)
	if !changed {
		return append([]byte(nil), r.held.buf...), nil
	}
	return r.st.Encode(r.held.events, actions, r.cur.Sent())
}

// heldCopy is the copy of a stream to hold for approval: only a stream
// whose calls were held and none of which went out can be replayed whole.
func (r *streamRun) heldCopy(v *pipeline.Verdict) *heldCopy {
	if v.Held() == nil || r.shadow || !r.holding || r.sw.begun() {
		return nil
	}
	return &heldCopy{contentType: contentTypeOf(r.c.Resp.Header), stream: true,
		render: func() ([]byte, error) { return r.heldStream(v.Held()) }}
}

// heldCopy is an answer as it would be released on approval: its content
// type, whether it is a stream, and how to render it, which only a held
// answer asks.
type heldCopy struct {
	contentType string
	stream      bool
	render      func() ([]byte, error)
}

// storeDownHeld is the 503's message when a held answer could not be
// stored.
const storeDownHeld = "the approval store cannot be reached; the call is held, retry the request"

// hold stores the held answer and returns the escalation that answers the
// request with the approval's ticket in it. down reports that the store
// could not be reached: the reply is a retryable 503 while the call stays
// held. An answer that cannot be rendered or bound to its request (a body
// without a canonical form, a call whose arguments are not JSON) escalates
// as before, with nothing to approve.
func (x *exchange) hold(v *pipeline.Verdict, e *neutral.Escalated, held *heldCopy) (answering *neutral.Escalated, down bool) {
	body, err := held.render()
	if err != nil {
		x.env.Log.Error("render failed", zap.String("request_id", x.requestID), zap.Error(err))
		return e, false
	}
	spec, err := x.holdSpec(v, e.ID, held.contentType, body, held.stream)
	if err != nil {
		x.env.Log.Info("confirm call not held", zap.String("request_id", x.requestID), zap.Error(err))
		return e, false
	}
	rec, secret, err := x.env.Approvals.Request(context.WithoutCancel(x.r.Context()), spec)
	if err != nil {
		x.env.Log.Warn("approval store failed; the call stays held", zap.String("request_id", x.requestID), zap.Error(err))
		return e, true
	}
	ticket, _ := json.Marshal(rec.Ticket(secret))
	x.out.approvalID = rec.ID
	x.env.Log.Info("call held for approval", zap.String("request_id", x.requestID),
		zap.String("approval_id", rec.ID), zap.String("escalation_id", rec.EscalationID))
	ticketed := *e
	ticketed.Body = withMember(e.Body, "approval", ticket)
	return &ticketed, false
}

// holdSpec gathers what binds a held answer to its request and calls.
func (x *exchange) holdSpec(v *pipeline.Verdict, escalationID, contentType string, held []byte, stream bool) (approval.HeldAnswer, error) {
	digest, err := approval.RequestDigest(x.body)
	if err != nil {
		return approval.HeldAnswer{}, err
	}
	approver := approval.Caller
	var calls []approval.HeldCall
	for _, r := range v.Held() {
		for i, c := range r.Calls {
			if c.Kind == neutral.Other {
				continue
			}
			ac, err := approval.NewCall(c.Name, c.Args)
			if err != nil {
				return approval.HeldAnswer{}, err
			}
			calls = append(calls, ac)
			if r.Reports[i].Tool != nil && r.Reports[i].Tool.Policy == catalog.PolicyConfirm &&
				r.Reports[i].Tool.Approver != catalog.ApproverCaller {
				// One call a person must see makes it the operator's.
				approver = approval.Operator
			}
		}
	}
	return approval.HeldAnswer{Approver: approver, RequestDigest: digest, Route: x.r.URL.Path, Upstream: x.up.Name(),
		Caller: x.caller(), CatalogVersion: x.gen.Snap.Version, EscalationID: escalationID, Calls: calls,
		Held: packHeld(contentType, held), Stream: stream, UserText: x.parsed.req.UserText}, nil
}

// packHeld keeps the answer's content type with its bytes: a Gemini
// stream may be an SSE stream or a JSON array.
func packHeld(contentType string, body []byte) []byte {
	out := make([]byte, 0, len(contentType)+1+len(body))
	out = append(out, contentType...)
	out = append(out, '\n')
	return append(out, body...)
}

func unpackHeld(b []byte) (contentType string, body []byte) {
	ct, body, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return "application/json", b
	}
	return string(ct), body
}

// withMember adds one member to a JSON object's text.
func withMember(obj []byte, name string, value []byte) []byte {
	end := bytes.LastIndexByte(obj, '}')
	if end < 0 {
		return obj
	}
	out := make([]byte, 0, len(obj)+len(name)+len(value)+4)
	out = append(out, obj[:end]...)
	if len(bytes.TrimSpace(obj[:end])) > 1 {
		out = append(out, ',')
	}
	out = strconv.AppendQuote(out, name)
	out = append(out, ':')
	out = append(out, value...)
	return append(out, obj[end:]...)
}

// resumeAsked reports a request that presents an approval.
func resumeAsked(r *http.Request) bool {
	return len(r.Header.Values(headerApproval)) > 0 || len(r.Header.Values(headerApprovalSecret)) > 0
}

// resume answers a request that presents an approval: the stored answer
// once, or a refusal. Nothing is sent upstream either way.
func (x *exchange) resume(body []byte) {
	svc := x.env.Approvals
	id, err := approval.ParseID(x.r.Header.Get(headerApproval))
	if svc == nil || err != nil || len(x.r.Header.Values(headerApproval)) != 1 {
		x.refuseResume(approval.CodeUnknown)
		return
	}
	var secret approval.Secret
	if vs := x.r.Header.Values(headerApprovalSecret); len(vs) > 0 {
		if secret, err = approval.ParseSecret(vs[0]); err != nil || len(vs) != 1 {
			x.refuseResume(approval.CodeSecret)
			return
		}
	}
	digest, err := approval.RequestDigest(body)
	if err != nil {
		x.refuseResume(approval.CodeMismatch)
		return
	}
	x.out.approvalID = id
	m := approval.Match{RequestDigest: digest, Route: x.r.URL.Path, Upstream: x.up.Name(), Caller: x.caller(), Secret: secret}
	ctx := context.WithoutCancel(x.r.Context())
	rec, err := svc.Get(ctx, id)
	if errors.Is(err, approval.ErrUnavailable) {
		x.approvalFailure(err)
		return
	}
	if err == nil && releasable(rec, m) {
		x.useRequest(x.parseRequest(body))
		if !x.stillValid(rec.Calls) {
			svc.Refuse(rec, approval.CodeStale)
			x.refuseResume(approval.CodeStale)
			return
		}
	}
	// The claim decides, atomically, whatever the record said a moment
	// ago; its refusals are the ones counted.
	rec, err = svc.Claim(ctx, id, m)
	if err != nil {
		x.approvalFailure(err)
		return
	}
	x.release(rec)
}

// releasable reports a record the claim would release for m, so its
// calls are worth judging again first.
func releasable(r *approval.Record, m approval.Match) bool {
	live := r.State == approval.Approved || r.State == approval.Pending && r.Approver == approval.Caller
	return live && r.Matches(m)
}

// caller is who presents the request, as an approval binds it: the digest
// of the inbound token, or "" without inbound_auth (the body, route and
// upstream still bind it).
func (x *exchange) caller() string {
	return approval.Binding{Token: CallerOf(x.w)}.Digest()
}

// stillValid judges the stored calls against the current catalog, as one
// batch, as they were judged when held.
func (x *exchange) stillValid(calls []approval.HeldCall) bool {
	batch := make([]validate.ToolCall, len(calls))
	at := make([]int, len(calls))
	for i, c := range calls {
		batch[i] = validate.ToolCall{ID: "call_" + strconv.Itoa(i), Name: c.Tool, Args: c.Arguments, Kind: neutral.Function}
		at[i] = i
	}
	for _, v := range x.callJudge.Batch(x.r.Context(), batch, at) {
		if !v.Valid() {
			return false
		}
	}
	return true
}

// release writes the stored answer: the upstream's bytes or a stream's
// events, in the route's framing, as they were held.
func (x *exchange) release(rec *approval.Record) {
	ct, body := unpackHeld(rec.Held)
	x.out.escalationID = rec.EscalationID
	x.write(pipeline.Reply{Status: http.StatusOK, Label: outcomeApproved, Decided: true, ContentType: ct, NoCache: rec.Stream, Body: body})
	x.env.Log.Info("approved call released", zap.String("request_id", x.requestID), zap.String("approval_id", rec.ID))
}

// approvalFailure answers a claim that released nothing.
func (x *exchange) approvalFailure(err error) {
	if rf, ok := approval.AsRefusal(err); ok {
		x.refuseResume(rf.Code)
		return
	}
	x.env.Log.Warn("approval store failed", zap.String("request_id", x.requestID), zap.Error(err))
	x.write(pipeline.FailureReply(x.codec, pipeline.StoreFailure("the approval store cannot be reached; retry the request")))
}

// refuseResume answers a refused resume in the route's envelope; a retry
// of the same request would be refused again.
func (x *exchange) refuseResume(code approval.RefusalCode) {
	rf := &approval.Refusal{Code: code}
	x.write(pipeline.FailureReply(x.codec, neutral.Failure{Status: rf.Status(), Code: neutral.FailureCode(code), Message: approvalRefusalText[code]}))
}

var approvalRefusalText = map[approval.RefusalCode]string{
	approval.CodePending:  "the call is waiting for a person's decision; retry once it is approved",
	approval.CodeDenied:   "a person denied the call",
	approval.CodeExpired:  "the approval expired before the call was released",
	approval.CodeUsed:     "the approval was used already; its call was released once",
	approval.CodeMismatch: "the request differs from the one that was held (body, route or upstream), or another client made it",
	approval.CodeUnknown:  "no such approval",
	approval.CodeStale:    "a held call no longer passes the current catalog",
	approval.CodeSecret:   "the approval secret is missing or wrong",
}

func contentTypeOf(h http.Header) string {
	if ct := h.Get("Content-Type"); ct != "" {
		return ct
	}
	return "application/json"
}
