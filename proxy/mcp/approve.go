package mcp

import (
	"context"
	"encoding/json"
	"net/http"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
)

// Approvals for MCP (docs/approvals.md, "MCP"): a client without elicitation
// gets its confirm call held in the approval store, the approval in the error
// result's _meta; after a person's yes it calls the same tool with the same
// arguments and params._meta["toolgate/approval"], and toolgate forwards
// exactly that call, once.

// Keys of params._meta a resume sets. Both are toolgate's and are removed
// before the call goes to the server.
const (
	metaApproval       = "toolgate/approval"
	metaApprovalSecret = "toolgate/approval_secret"
)

// outcomeApproved counts a call released by an approval.
const outcomeApproved = "approved"

// resumeMeta reads the approval a tools/call presents.
func resumeMeta(params []byte) (id, secret string, ok bool) {
	p, err := jsonx.ParseObject(params)
	if err != nil {
		return "", "", false
	}
	meta, err := jsonx.ParseObject(p.Get("_meta"))
	if err != nil || !meta.Has(metaApproval) {
		return "", "", false
	}
	id, _ = jsonx.Unquote(meta.Get(metaApproval))
	secret, _ = jsonx.Unquote(meta.Get(metaApprovalSecret))
	return id, secret, true
}

// callMatch binds an approval to the exact call: its tool and canonical
// arguments, on this route's server, from this caller.
func (cr *clientRequest) callMatch(name string, args []byte) (approval.Match, error) {
	d, err := approval.CallDigest(name, args)
	return approval.Match{RequestDigest: d, Route: cr.r.URL.Path, Upstream: cr.rt.cfg.Name, Caller: cr.boundCaller()}, err
}

// boundCaller is who makes the call, as an approval binds it: the session the
// client sent (a stateless revision has none) and the inbound token it
// authenticated with, when inbound_auth is on. Neither: "", and the call
// and route alone bind the approval.
func (cr *clientRequest) boundCaller() string {
	b := approval.Binding{Session: cr.r.Header.Get(hdrSession)}
	if f := cr.rt.gateway.deps.CallerToken; f != nil {
		b.Token = f(cr.w)
	}
	return b.Digest()
}

// holdUnconfirmed is refuseUnconfirmed with the call stored for a person
// to approve, when approvals are on.
func (cr *clientRequest) holdUnconfirmed(h *held, why string) []byte {
	svc := cr.rt.gateway.deps.Approvals
	m, err := cr.callMatch(h.name, h.args)
	heldCall, err2 := approval.NewCall(h.name, h.args)
	if svc == nil || err != nil || err2 != nil {
		return cr.refuseUnconfirmed(h, why)
	}
	cr.outcome = outcomeEscalated
	e := h.ruling.Decline(why)
	approver := approval.Operator
	if h.ruling.CallerApproves {
		approver = approval.Caller
	}
	rec, secret, err := svc.Request(context.WithoutCancel(cr.ctx), approval.HeldAnswer{Approver: approver, RequestDigest: m.RequestDigest,
		Route: m.Route, Upstream: m.Upstream, Caller: m.Caller, CatalogVersion: h.call.Set.Version, EscalationID: e.ID, Calls: []approval.HeldCall{heldCall}})
	if err != nil {
		cr.log().Warn("approval store failed; the call stays held", zap.Error(err))
		return cr.failure(h.m.id, storeFailure("the approval store cannot be reached; the call was not run, retry it"))
	}
	e.Advice = "A person must approve this call; once approved, call the tool again with the same arguments and params._meta[\"toolgate/approval\"] set to " + rec.ID + "."
	e.Approval, _ = json.Marshal(rec.Ticket(secret))
	return refusal(h.call, e)
}

// resume releases an approved call once, or answers why not. It reports
// false when the call presents no approval.
func (cr *clientRequest) resume(h *held) bool {
	id, secretText, ok := resumeMeta(h.m.params)
	if !ok {
		return false
	}
	svc := cr.rt.gateway.deps.Approvals
	if _, err := approval.ParseID(id); svc == nil || err != nil {
		cr.refuseResume(h, approval.CodeUnknown)
		return true
	}
	m, err := cr.callMatch(h.name, h.args)
	if err != nil {
		cr.refuseResume(h, approval.CodeMismatch)
		return true
	}
	if secretText != "" {
		if m.Secret, err = approval.ParseSecret(secretText); err != nil {
			cr.refuseResume(h, approval.CodeSecret)
			return true
		}
	}
	// The call was judged against the current catalog on its way here.
	if _, err := svc.Claim(context.WithoutCancel(cr.ctx), id, m); err != nil {
		if rf, ok := approval.AsRefusal(err); ok {
			cr.refuseResume(h, rf.Code)
			return true
		}
		cr.outcome = outcomeUpstreamError
		cr.writeJSON(http.StatusOK, cr.failure(h.m.id, storeFailure("the approval store cannot be reached; retry the call")))
		return true
	}
	cr.outcome = outcomeApproved
	msg := *h.m
	msg.raw = withoutApprovalMeta(h.m.raw)
	cr.trackCall(&msg, h.call.Set, h.name)
	cr.forward(msg.raw, []message{msg}, nil)
	return true
}

// refuseResume answers a resume that releases nothing: a JSON-RPC error
// whose data.code is the refusal's code (docs/approvals.md, "Resume
// refusals").
func (cr *clientRequest) refuseResume(h *held, code approval.RefusalCode) {
	cr.outcome = outcomeEscalated
	cr.writeJSON(http.StatusOK, jsonrpc.ErrorResponse(h.m.id, jsonrpc.CodeInvalidRequest, "the approval does not release this call: "+string(code),
		map[string]any{"code": code}))
}

// withoutApprovalMeta removes toolgate's keys from params._meta, so the
// server never sees an approval or its secret. A message it cannot edit
// is returned as it is; parseBody read it already, so that does not occur.
func withoutApprovalMeta(raw []byte) []byte {
	msg, err := jsonx.ParseObject(raw)
	if err != nil {
		return raw
	}
	params, err := jsonx.ParseObject(msg.Get("params"))
	if err != nil {
		return raw
	}
	meta, err := jsonx.ParseObject(params.Get("_meta"))
	if err != nil {
		return raw
	}
	meta = meta.Delete(metaApproval).Delete(metaApprovalSecret)
	if len(meta) == 0 {
		params = params.Delete("_meta")
	} else {
		params = params.Set("_meta", meta.Bytes())
	}
	return msg.Set("params", params.Bytes()).Bytes()
}

// staleResume answers a resume whose approved call no longer passes the
// catalog with approval_stale, instead of the refusal a new call would
// get. It is nil when the call passes, presents no approval, or is not
// the approved call (the claim then says why).
func (cr *clientRequest) staleResume(msg *message, name string, args []byte, ruling Ruling) []byte {
	svc := cr.rt.gateway.deps.Approvals
	if svc == nil || ruling.Disposition == Forward || ruling.Disposition == Confirm {
		return nil
	}
	id, _, ok := resumeMeta(msg.params)
	if !ok {
		return nil
	}
	m, err := cr.callMatch(name, args)
	if err != nil {
		return nil
	}
	rec, err := svc.Get(context.WithoutCancel(cr.ctx), id)
	if err != nil || !rec.Matches(m) {
		return nil
	}
	svc.Refuse(rec, approval.CodeStale)
	cr.outcome = outcomeEscalated
	return jsonrpc.ErrorResponse(msg.id, jsonrpc.CodeInvalidRequest, "the approval does not release this call: "+string(approval.CodeStale),
		map[string]any{"code": approval.CodeStale})
}
