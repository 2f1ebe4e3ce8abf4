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
func (x *exchange) refuseUnconfirmed(h *held, why string) []byte {
	x.outcome = outcomeEscalated
	e := h.ruling.Decline(why)
	e.Advice = "A person must confirm this call before it runs; ask the user, then call again through a client that can show toolgate's question."
	return refusal(h.call, e)
}

// confirm asks the person behind the client through MCP elicitation, on an
// SSE answer to the call's own POST, and forwards the call on a yes.
func (x *exchange) confirm(h *held) {
	if x.resume(h) {
		return
	}
	if x.modern {
		x.confirmStateless(h)
		return
	}
	_, elicit := x.sess.info()
	if !elicit || !strings.Contains(x.r.Header.Get("Accept"), "text/event-stream") {
		x.writeJSON(http.StatusOK, x.holdUnconfirmed(h, "this client did not declare the elicitation capability, so toolgate cannot ask a person to confirm the call"))
		return
	}
	id := "toolgate-confirm-" + randomHex()
	answer := make(chan json.RawMessage, 1)
	cancelled := make(chan struct{})
	x.sess.hold(id, answer, h.m.idKey(), cancelled)
	defer x.sess.unhold(id, h.m.idKey())

	hd := x.w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	x.w.WriteHeader(http.StatusOK)
	_, _ = x.w.Write(jsonrpc.Event(nil, request(id, "elicitation/create", x.question(h))))
	_ = http.NewResponseController(x.w).Flush()

	timer := time.NewTimer(x.rt.snap.Config.Catalog.MCP.ConfirmTimeout.D())
	defer timer.Stop()
	var why string
	select {
	case a := <-answer:
		if accepted(a) {
			x.outcome = outcomeConfirmed
			x.forwardConfirmed(h)
			return
		}
		why = "the person declined the call"
	case <-timer.C:
		why = "no person answered the confirmation in time"
	case <-cancelled:
		return // the client cancelled the call; it expects no answer
	case <-x.ctx.Done():
		return
	}
	_, _ = x.w.Write(jsonrpc.Event(nil, x.refuseUnconfirmed(h, why)))
	_ = http.NewResponseController(x.w).Flush()
}

// question is the elicitation/create params: what the call does and one
// yes/no field.
func (x *exchange) question(h *held) map[string]any {
	args := string(h.args)
	if len(args) > maxArgsShown {
		args = args[:maxArgsShown] + "…"
	}
	p := map[string]any{
		"message": "The agent wants to run the tool " + strconv.Quote(h.name) + " on the MCP server " +
			strconv.Quote(x.rt.cfg.Name) + " with these arguments:\n" + args + "\nAllow this call?",
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{"confirm": map[string]any{
				"type": "boolean", "title": "Allow " + h.name, "description": "Yes runs the call once."}},
			"required": []string{"confirm"},
		},
	}
	if v, _ := x.sess.info(); v >= protocol20251125 {
		p["mode"] = "form"
	}
	return p
}

// accepted reads an elicitation answer: a yes is action accept with
// confirm true; anything else, an error included, is a no.
func accepted(a json.RawMessage) bool {
	res, err := jsonx.ParseObject(a)
	if err != nil || str(res, "action") != "accept" {
		return false
	}
	content, err := jsonx.ParseObject(res.Get("content"))
	return err == nil && string(compact(content.Get("confirm"))) == "true"
}

// forwardConfirmed sends a confirmed call and relays the server's answer
// into the SSE stream already open to the client.
func (x *exchange) forwardConfirmed(h *held) {
	x.trackCall(h.m, h.call.Set, h.name)
	resp, done, err := x.sendTimed(h.m.raw)
	if err != nil {
		x.outcome = outcomeUpstreamError
		_, _ = x.w.Write(jsonrpc.Event(nil, x.failure(h.m.id, upstreamFailure(x.downMessage()))))
		return
	}
	defer done()
	switch mediaType(resp.Header) {
	case "text/event-stream":
		x.pipeSSE(resp.Body, []message{*h.m})
	case "application/json":
		limit := x.rt.snap.Config.Limits.MaxResponseBytes
		b, err := readLimited(resp.Body, limit)
		msgs, _, _, perr := parseBody(b)
		if err != nil || perr != nil || len(msgs) != 1 {
			x.outcome = outcomeUpstreamError
			_, _ = x.w.Write(jsonrpc.Event(nil, x.failure(h.m.id, upstreamFailure("the MCP server's answer could not be read"))))
			return
		}
		out := msgs[0].raw
		if c, ok := x.inspect(&msgs[0]); ok {
			out = c
		}
		_, _ = x.w.Write(jsonrpc.Event(nil, out))
	default:
		x.outcome = outcomeUpstreamError
		_, _ = x.w.Write(jsonrpc.Event(nil, x.failure(h.m.id, upstreamFailure("the MCP server answered HTTP "+strconv.Itoa(resp.StatusCode)))))
	}
	_ = http.NewResponseController(x.w).Flush()
}
