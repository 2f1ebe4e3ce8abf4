package mcp

import (
	"errors"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
)

// held is a valid call to a tool that needs a person's yes first.
type held struct {
	m    *message
	call *Call
	// name and args are the call's, as the route read them.
	name   string
	args   []byte
	ruling Ruling
	// state is toolgate's own requestState a stateless retry carries.
	state *signedState
}

// judge decides a tools/call before the server sees it: an answer toolgate
// gives itself (a refusal), a call held for confirmation, or neither, and
// then it is forwarded. The pipeline judges; this reads its ruling.
func (cr *clientRequest) judge(m *message) ([]byte, *held) {
	name, args, task, problem := callParams(m.params)
	if problem != "" {
		return jsonrpc.ErrorResponse(m.id, jsonrpc.CodeInvalidParams, "Invalid params: "+problem, nil), nil
	}
	set, err := cr.catalog(name)
	var gone *sessionGone
	if errors.As(err, &gone) {
		cr.gone = gone
		return cr.failure(m.id, upstreamFailure(gone.Error())), nil
	}
	if err != nil {
		cr.outcome = outcomeUpstreamError
		cr.log().Warn("mcp tool list unavailable; call not forwarded", zap.Error(err))
		msg := cr.downMessage() + "; toolgate could not read its tool list, so it did not judge or forward this call"
		var le *listError
		if errors.As(err, &le) {
			msg = le.Error() + "; toolgate could not judge this call, so it did not forward it"
		}
		return cr.failure(m.id, upstreamFailure(msg)), nil
	}
	if ans := cr.pinRefusal(m, name); ans != nil {
		return ans, nil
	}
	var state *signedState
	if cr.statelessRevision {
		var ans []byte
		if state, ans = cr.retryState(m, name, args); ans != nil {
			return ans, nil
		}
	}
	c := &Call{RequestID: cr.rid, Server: cr.rt.cfg.Name, Session: cr.sess.label(), Set: set, Message: m.raw,
		ID: m.id, Name: name, Args: args, Task: task}
	ruling := cr.rt.pipe.Judge(cr.ctx, c)
	cr.findings = append(cr.findings, ruling.Noted...)
	if ans := cr.staleResume(m, name, args, ruling); ans != nil {
		return ans, nil
	}
	switch ruling.Disposition {
	case UnknownTool, Refuse:
		cr.outcome = outcomeEscalated
		return refusal(c, ruling.Escalation), nil
	case Confirm:
		return nil, &held{m: m, call: c, name: name, args: args, ruling: ruling, state: state}
	}
	if state != nil {
		// A retry of a call asked about before a reload made its tool
		// need no yes: the person's answer still decides it, and
		// toolgate's state never reaches the server.
		return nil, &held{m: m, call: c, name: name, args: args, ruling: ruling, state: state}
	}
	cr.trackCall(m, set, name)
	return nil, nil
}

// trackCall remembers a forwarded call so its result is checked against
// the tool's outputSchema, on this stream or a resumed one.
func (cr *clientRequest) trackCall(m *message, set *catalog.MCPSet, name string) {
	t := tracked{kind: trackCall, tool: name, output: set.Output[name], version: set.Version, label: set.Labels[name]}
	cr.tracked[m.idKey()] = t
	if cr.sess.id != "" {
		cr.sess.track(m.idKey(), t)
	}
}

// catalog is the session's judged tool set, read from the server first
// when toolgate has no fresh list of it.
func (cr *clientRequest) catalog(name string) (*catalog.MCPSet, error) {
	if cr.statelessRevision {
		return cr.statelessSet(name)
	}
	if set := cr.sess.catalogFor(cr.rt.snap, cr.rt.cfg.Name); set != nil {
		return set, nil
	}
	if err := cr.fetchTools(); err != nil {
		return nil, err
	}
	return cr.sess.catalogFor(cr.rt.snap, cr.rt.cfg.Name), nil
}

// refusal is the answer to the refused call c, in its own JSON-RPC shape.
func refusal(c *Call, e *neutral.Escalated) []byte {
	return jsonrpc.NewCall(c.ID, c.Name, c.Task, c.Message).Refusal(e)
}
