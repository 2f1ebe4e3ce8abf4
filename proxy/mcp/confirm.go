package mcp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
)

// maxArgsShown bounds the arguments an elicitation shows a person.
const maxArgsShown = 4096

// refuseUnconfirmed answers a confirm call that no person can be asked
// about with an error result that says so.
func (cr *clientRequest) refuseUnconfirmed(h *held, why string) []byte {
	cr.outcome = outcomeEscalated
	e := h.ruling.Decline(why)
	e.Advice = "A person must confirm this call before it runs; ask the user, then call again through a client that can show toolgate's question."
	return refusal(h.call, e)
}

// confirm asks the person behind the client through MCP elicitation, on an
// SSE answer to the call's own POST, and forwards the call on a yes.
func (cr *clientRequest) confirm(h *held) {
	if cr.resume(h) {
		return
	}
	if cr.statelessRevision {
		cr.confirmStateless(h)
		return
	}
	_, elicit := cr.sess.negotiated()
	if !elicit || !strings.Contains(cr.r.Header.Get("Accept"), "text/event-stream") {
		cr.writeJSON(http.StatusOK, cr.holdUnconfirmed(h, "this client did not declare the elicitation capability, so toolgate cannot ask a person to confirm the call"))
		return
	}
	id := "toolgate-confirm-" + randomHex()
	answer := make(chan json.RawMessage, 1)
	cancelled := make(chan struct{})
	cr.sess.hold(id, answer, h.m.idKey(), cancelled)
	defer cr.sess.unhold(id, h.m.idKey())

	hd := cr.w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	cr.w.WriteHeader(http.StatusOK)
	_, _ = cr.w.Write(jsonrpc.Event(nil, request(id, "elicitation/create", cr.question(h))))
	_ = http.NewResponseController(cr.w).Flush()

	timer := time.NewTimer(cr.rt.snap.Config.Catalog.MCP.ConfirmTimeout.D())
	defer timer.Stop()
	var why string
	select {
	case a := <-answer:
		if accepted(a) {
			cr.outcome = outcomeConfirmed
			cr.forwardConfirmed(h)
			return
		}
		why = "the person declined the call"
	case <-timer.C:
		why = "no person answered the confirmation in time"
	case <-cancelled:
		return // the client cancelled the call; it expects no answer
	case <-cr.ctx.Done():
		return
	}
	_, _ = cr.w.Write(jsonrpc.Event(nil, cr.refuseUnconfirmed(h, why)))
	_ = http.NewResponseController(cr.w).Flush()
}

// question is the elicitation/create params: what the call does and one
// yes/no field.
func (cr *clientRequest) question(h *held) map[string]any {
	args := string(h.args)
	if len(args) > maxArgsShown {
		args = args[:maxArgsShown] + "…"
	}
	p := map[string]any{
		"message": "The agent wants to run the tool " + strconv.Quote(h.name) + " on the MCP server " +
			strconv.Quote(cr.rt.cfg.Name) + " with these arguments:\n" + args + "\nAllow this call?",
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{"confirm": map[string]any{
				"type": "boolean", "title": "Allow " + h.name, "description": "Yes runs the call once."}},
			"required": []string{"confirm"},
		},
	}
	if v, _ := cr.sess.negotiated(); v >= protocol20251125 {
		p["mode"] = "form"
	}
	return p
}

// accepted reads an elicitation answer: a yes is action accept with
// confirm true; anything else, an error included, is a no.
func accepted(a json.RawMessage) bool {
	res, err := jsonx.ParseObject(a)
	if err != nil || stringMember(res, "action") != "accept" {
		return false
	}
	content, err := jsonx.ParseObject(res.Get("content"))
	return err == nil && string(compact(content.Get("confirm"))) == "true"
}

// forwardConfirmed sends a confirmed call and relays the server's answer
// into the SSE stream already open to the client.
func (cr *clientRequest) forwardConfirmed(h *held) {
	cr.trackCall(h.m, h.call.Set, h.name)
	resp, done, err := cr.sendTimed(h.m.raw)
	if err != nil {
		cr.outcome = outcomeUpstreamError
		_, _ = cr.w.Write(jsonrpc.Event(nil, cr.failure(h.m.id, upstreamFailure(cr.downMessage()))))
		return
	}
	defer done()
	switch mediaType(resp.Header) {
	case "text/event-stream":
		cr.pipeSSE(resp.Body, []message{*h.m})
	case "application/json":
		limit := cr.rt.snap.Config.Limits.MaxResponseBytes
		b, err := readLimited(resp.Body, limit)
		msgs, _, _, perr := parseBody(b)
		if err != nil || perr != nil || len(msgs) != 1 {
			cr.outcome = outcomeUpstreamError
			_, _ = cr.w.Write(jsonrpc.Event(nil, cr.failure(h.m.id, upstreamFailure("the MCP server's answer could not be read"))))
			return
		}
		out := msgs[0].raw
		if c, ok := cr.inspect(&msgs[0]); ok {
			out = c
		}
		_, _ = cr.w.Write(jsonrpc.Event(nil, out))
	default:
		cr.outcome = outcomeUpstreamError
		_, _ = cr.w.Write(jsonrpc.Event(nil, cr.failure(h.m.id, upstreamFailure("the MCP server answered HTTP "+strconv.Itoa(resp.StatusCode)))))
	}
	_ = http.NewResponseController(cr.w).Flush()
}
