package openaichat

import (
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// EncodeAnswer implements api.Codec. Only the choices an action touches
// are rewritten, and in them only the message; the rest of the answer
// keeps the upstream's bytes. The first escalation of a message-mode
// answer also goes into toolgate_escalation.
func (*codec) EncodeAnswer(a *neutral.Answer, actions []neutral.Action) ([]byte, error) {
	obj, choices, err := splitChoices(a.Body)
	if err != nil {
		return nil, err
	}
	var escalation []byte
	for i := range actions {
		act := &actions[i]
		if i >= len(choices) {
			break
		}
		if !rewrites(act) {
			continue
		}
		c, err := jsonx.ParseObject(choices[i])
		if err != nil {
			return nil, err
		}
		if act.Kind == neutral.Respond {
			c = c.Set("message", textMessage(act.Text))
			c = c.Set("finish_reason", []byte(`"stop"`))
			if act.Escalation != nil && escalation == nil {
				escalation = act.Escalation.Body
			}
		} else if c, err = replaceCalls(c, act); err != nil {
			return nil, err
		}
		choices[i] = c.Bytes()
	}
	obj = obj.Set("choices", jsonx.AppendArray(nil, choices))
	if escalation != nil {
		obj = obj.Set("toolgate_escalation", escalation)
	}
	return obj.Bytes(), nil
}

// splitChoices splits an answer or chunk into its top level and a copy of
// its choices, which the caller rewrites in place.
func splitChoices(body []byte) (jsonx.Object, [][]byte, error) {
	obj, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, nil, err
	}
	choices, err := jsonx.ParseArray(obj.Get("choices"))
	if err != nil {
		return nil, nil, err
	}
	return obj, append([][]byte(nil), choices...), nil
}

// rewrites reports whether act changes its choice's bytes: a Replace that
// marks no call changed keeps them, as the upstream sent them.
func rewrites(act *neutral.Action) bool {
	if act.Kind == neutral.Respond {
		return true
	}
	for j := range act.Changed {
		if act.ChangedAt(j) {
			return true
		}
	}
	return false
}

// replaceCalls rewrites the message's calls that act replaced; each keeps
// its id and every function field but the name and arguments.
func replaceCalls(c jsonx.Object, act *neutral.Action) (jsonx.Object, error) {
	msg, err := jsonx.ParseObject(c.Get("message"))
	if err != nil {
		return nil, err
	}
	if fc := msg.Get("function_call"); !jsonx.IsNull(fc) {
		// The legacy form's one call is written back in its own shape,
		// with no id.
		if !act.ChangedAt(0) {
			return c, nil
		}
		msg = msg.Set("function_call", replacedFunction(fc, act.Calls[0]))
		return c.Set("message", msg.Bytes()), nil
	}
	calls, err := jsonx.ParseArray(msg.Get("tool_calls"))
	if err != nil {
		return nil, err
	}
	calls = append([][]byte(nil), calls...)
	for j := range calls {
		if !act.ChangedAt(j) {
			continue
		}
		call, err := jsonx.ParseObject(calls[j])
		if err != nil {
			return nil, err
		}
		nc := act.Calls[j]
		calls[j] = call.Set("type", []byte(`"function"`)).Set("function", replacedFunction(call.Get("function"), nc)).Bytes()
	}
	msg = msg.Set("tool_calls", jsonx.AppendArray(nil, calls))
	return c.Set("message", msg.Bytes()), nil
}

// replacedFunction is the function object old (a tool call's function or a
// legacy function_call) with nc's name and arguments, keeping its other
// fields.
func replacedFunction(old []byte, nc neutral.ToolCall) []byte {
	fn := jsonx.Object{
		{Key: "name", Value: jsonx.String(nc.Name)},
		{Key: "arguments", Value: jsonx.String(string(nc.Args))},
	}
	if o, err := jsonx.ParseObject(old); err == nil {
		fn = o.Set("name", jsonx.String(nc.Name)).Set("arguments", jsonx.String(string(nc.Args)))
	}
	return fn.Bytes()
}

// textMessage is the assistant message that answers with text instead of
// calls.
func textMessage(text string) []byte {
	return jsonx.Object{
		{Key: "role", Value: []byte(`"assistant"`)},
		{Key: "content", Value: jsonx.String(text)},
		{Key: "refusal", Value: []byte("null")},
	}.Bytes()
}

// CallJSON implements api.Codec. A call of a legacy request is written as
// a function_call, which has no id.
func (cd *codec) CallJSON(c neutral.ToolCall) []byte {
	fn := jsonx.Object{
		{Key: "name", Value: jsonx.String(c.Name)},
		{Key: "arguments", Value: jsonx.String(string(c.Args))},
	}
	if cd.legacy {
		return fn.Bytes()
	}
	call := jsonx.Object{
		{Key: "id", Value: jsonx.String(c.ID)},
		{Key: "type", Value: []byte(`"function"`)},
		{Key: "function", Value: fn.Bytes()},
	}
	return call.Bytes()
}
