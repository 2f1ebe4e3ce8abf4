package anthropic

import (
	"strconv"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// ErrorEvent implements api.Stream: an `error` event, which the Anthropic
// SDKs raise as an API error, typed as a plain answer's error would be.
// The stream needs no terminator after it.
func (s *stream) ErrorEvent(f neutral.Failure, esc *neutral.Escalated, _ api.Sent) []byte {
	if esc != nil {
		return sse.AppendEvent(nil, "error", escalationEnvelope(esc))
	}
	return sse.AppendEvent(nil, "error", failureEnvelope(f))
}

// UpstreamError implements api.Stream: the upstream's error event as it
// came. Its blocks carry their own indexes, so nothing needs renumbering
// when held ones were dropped.
func (s *stream) UpstreamError(ev neutral.HeldEvent, _ api.Sent) []byte {
	return append([]byte(nil), ev.Raw...)
}

// Encode implements api.Stream. Held events that carry nothing that changed
// go out as the upstream sent them. A replaced call is sent whole: its
// content_block_start with the new name and input {}, one input_json_delta
// with the new arguments, and its own content_block_stop; its original
// fragments are dropped. A choice that responds with text loses every held
// content block to one text block at the first held index, and its
// message_delta says end_turn. Indexes stay contiguous either way.
func (s *stream) Encode(held []neutral.HeldEvent, actions []neutral.Action, _ api.Sent) ([]byte, error) {
	if len(actions) == 0 || !replacesAny(&actions[0]) {
		return joinHeld(held), nil
	}
	if actions[0].Kind == neutral.Respond {
		return s.encodeRespond(held, &actions[0])
	}
	return s.encodeReplace(held, &actions[0])
}

// heldBlock decodes a held event and, for an event of a started content
// block, returns that block's index. Feed read every held event, so one
// that does not decode does not happen; it goes out as it came.
func (s *stream) heldBlock(ev *neutral.HeldEvent, e *event) (idx int, isBlock, ok bool) {
	if len(ev.Data) == 0 || s.dec.decode(ev.Data, []byte(ev.Event), e) != nil {
		return 0, false, false
	}
	switch e.typ {
	case "content_block_start", "content_block_delta", "content_block_stop":
		if !e.hasIndex || e.index < 0 || e.index >= len(s.blocks) {
			return 0, false, false
		}
		return e.index, true, true
	}
	return 0, false, true
}

// encodeReplace writes the held events with the replaced calls sent anew.
func (s *stream) encodeReplace(held []neutral.HeldEvent, act *neutral.Action) ([]byte, error) {
	var out []byte
	var e event
	for i := range held {
		ev := &held[i]
		idx, isBlock, _ := s.heldBlock(ev, &e)
		if !isBlock || !act.ChangedAt(s.blocks[idx].call) {
			out = append(out, ev.Raw...)
			continue
		}
		switch e.typ {
		case "content_block_start":
			ev2, err := rewriteStart(ev, act.Calls[s.blocks[idx].call])
			if err != nil {
				return nil, err
			}
			out = append(out, ev2...)
		case "content_block_stop":
			out = append(out, ev.Raw...)
		}
		// The original fragments of a replaced call are dropped.
	}
	return out, nil
}

// encodeRespond writes the held events with every held content block
// replaced by one text block.
func (s *stream) encodeRespond(held []neutral.HeldEvent, act *neutral.Action) ([]byte, error) {
	var out []byte
	var e event
	first := -1 // index of the first held block start
	wrote := false
	for i := range held {
		ev := &held[i]
		idx, isBlock, ok := s.heldBlock(ev, &e)
		switch {
		case isBlock:
			if e.typ == "content_block_start" && first < 0 {
				first = idx
			}
			if first < 0 || idx < first {
				// A block begun before the hold was already partly sent.
				out = append(out, ev.Raw...)
				continue
			}
			if !wrote {
				wrote, out = true, appendTextBlock(out, first, act.Text)
			}
		case ok && e.typ == "message_delta":
			if !wrote {
				at := first
				if at < 0 {
					at = len(s.blocks)
				}
				wrote, out = true, appendTextBlock(out, at, act.Text)
			}
			data, err := endTurn(ev.Data, act.Escalation)
			if err != nil {
				return nil, err
			}
			out = sse.AppendEvent(out, eventName(ev, e.typ), data)
		default:
			out = append(out, ev.Raw...)
		}
	}
	return out, nil
}

// eventName is the SSE event name to write a rewritten event under.
func eventName(ev *neutral.HeldEvent, typ string) string {
	if ev.Event != "" {
		return ev.Event
	}
	return typ
}

// rewriteStart writes a replaced call's content_block_start, keeping every
// other field of the event and of its block (id, caller…), and the single
// delta that carries its arguments.
func rewriteStart(ev *neutral.HeldEvent, c neutral.ToolCall) ([]byte, error) {
	obj, err := jsonx.ParseObject(ev.Data)
	if err != nil {
		return nil, err
	}
	obj = append(jsonx.Object(nil), obj...)
	cb, err := jsonx.ParseObject(obj.Get("content_block"))
	if err != nil {
		return nil, err
	}
	cb = append(jsonx.Object(nil), cb...)
	cb = cb.Set("name", jsonx.String(c.Name)).Set("input", []byte("{}"))
	obj = obj.Set("content_block", cb.Bytes())
	args, err := objectJSON(c.Args)
	if err != nil {
		return nil, err
	}
	out := sse.AppendEvent(nil, eventName(ev, "content_block_start"), obj.Bytes())
	delta := jsonx.Object{
		{Key: "type", Value: []byte(`"content_block_delta"`)},
		{Key: "index", Value: obj.Get("index")},
		{Key: "delta", Value: jsonx.Object{
			{Key: "type", Value: []byte(`"input_json_delta"`)},
			{Key: "partial_json", Value: jsonx.String(string(args))},
		}.Bytes()},
	}
	return sse.AppendEvent(out, "content_block_delta", delta.Bytes()), nil
}

// endTurn rewrites a message_delta for an answer that became text: the
// stop reason is end_turn, usage and unknown fields stay, and an escalation
// rides along in toolgate_escalation.
func endTurn(data []byte, esc *neutral.Escalated) ([]byte, error) {
	obj, err := jsonx.ParseObject(data)
	if err != nil {
		return nil, err
	}
	obj = append(jsonx.Object(nil), obj...)
	delta, err := jsonx.ParseObject(obj.Get("delta"))
	if err != nil {
		delta = nil
	}
	delta = append(jsonx.Object(nil), delta...)
	delta = delta.Set("stop_reason", []byte(`"end_turn"`))
	if delta.Has("stop_sequence") {
		delta = delta.Set("stop_sequence", []byte("null"))
	}
	obj = obj.Set("delta", delta.Bytes())
	if esc != nil {
		obj = obj.Set("toolgate_escalation", esc.Body)
	}
	return obj.Bytes(), nil
}

// appendTextBlock writes one whole text block at index.
func appendTextBlock(out []byte, index int, text string) []byte {
	idx := []byte(strconv.Itoa(index))
	out = sse.AppendEvent(out, "content_block_start", jsonx.Object{
		{Key: "type", Value: []byte(`"content_block_start"`)},
		{Key: "index", Value: idx},
		{Key: "content_block", Value: []byte(`{"type":"text","text":""}`)},
	}.Bytes())
	out = sse.AppendEvent(out, "content_block_delta", jsonx.Object{
		{Key: "type", Value: []byte(`"content_block_delta"`)},
		{Key: "index", Value: idx},
		{Key: "delta", Value: jsonx.Object{
			{Key: "type", Value: []byte(`"text_delta"`)},
			{Key: "text", Value: jsonx.String(text)},
		}.Bytes()},
	}.Bytes())
	return sse.AppendEvent(out, "content_block_stop", jsonx.Object{
		{Key: "type", Value: []byte(`"content_block_stop"`)},
		{Key: "index", Value: idx},
	}.Bytes())
}

func joinHeld(held []neutral.HeldEvent) []byte {
	var out []byte
	for _, h := range held {
		out = append(out, h.Raw...)
	}
	return out
}
