package gemini

import (
	"bytes"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
)

// Encode implements api.Stream. Held chunks whose calls did not change go
// out as the upstream sent them. A replaced call is rewritten in its chunk,
// keeping its id and thoughtSignature. A candidate answered with text (an
// escalation or an abstention) loses every held part except the text that preceded its first call in
// the same chunk (that text was the model's answer, and is sent once); its
// last held chunk carries the replacement text part, finishReason STOP and,
// for an escalation, toolgate_escalation. The held events are the ones fed
// after the sent.Events that went out; the first of those carried the
// array's opening bracket.
func (s *stream) Encode(held []neutral.HeldEvent, actions []neutral.Action, sent api.Sent) ([]byte, error) {
	heldFrom := s.firstChunkAfter(sent.Events)
	last := make(map[int]int)
	for n := heldFrom; n < len(s.chunks); n++ {
		for _, cc := range s.chunks[n] {
			last[cc.index] = n
		}
	}
	r := &renderer{s: s, actions: actions, last: last, opened: sent.Events > 0}
	n := heldFrom
	for _, ev := range held {
		if len(ev.Data) == 0 {
			r.passEmpty(ev)
			continue
		}
		data, keep, err := r.chunk(ev.Data, n)
		n++
		if err != nil {
			return nil, err
		}
		if keep {
			r.write(ev, data)
		}
	}
	return r.out, nil
}

// firstChunkAfter is the first chunk that is not among the first events
// fed (the first held chunk, when those went out), or the number of chunks
// when every chunk is among them.
func (s *stream) firstChunkAfter(events int) int {
	n := len(s.chunkAt)
	for n > 0 && s.chunkAt[n-1] >= events {
		n--
	}
	return n
}

// renderer writes one Encode's output.
type renderer struct {
	s       *stream
	actions []neutral.Action
	last    map[int]int
	out     []byte
	// opened: the array's opening bracket is out.
	opened bool
}

// passEmpty writes an event without data: an SSE comment or blank line,
// or the array's closing bracket (opening the array first if no element
// went out).
func (r *renderer) passEmpty(ev neutral.HeldEvent) {
	if r.s.arr != nil && !r.opened {
		r.out = append(r.out, '[')
		r.opened = true
		r.out = append(r.out, ']')
		return
	}
	r.out = append(r.out, ev.Raw...)
}

// write writes one chunk; data nil means as the upstream sent it.
func (r *renderer) write(ev neutral.HeldEvent, data []byte) {
	if r.s.arr == nil {
		if data == nil {
			r.out = append(r.out, ev.Raw...)
		} else {
			r.out = r.s.appendEvent(r.out, ev.Event, data)
		}
		return
	}
	if data == nil {
		prefix := ev.Raw[:len(ev.Raw)-len(ev.Data)]
		if bytes.IndexByte(prefix, '[') >= 0 != r.opened {
			// The element's own delimiter still fits what went out.
			r.out = append(r.out, ev.Raw...)
			r.opened = true
			return
		}
		data = ev.Data
	}
	// Delimited afresh: a dropped element may have carried the bracket.
	if r.opened {
		r.out = append(r.out, ',')
	} else {
		r.out = append(r.out, '[')
		r.opened = true
	}
	r.out = append(r.out, data...)
}

// chunk renders held chunk n; keep is false for a chunk left with nothing
// to say, and data nil for one that goes out unchanged.
func (r *renderer) chunk(data []byte, n int) (out []byte, keep bool, err error) {
	if n < 0 || n >= len(r.s.chunks) {
		return nil, true, nil
	}
	obj, err := jsonx.ParseObject(data)
	if err != nil {
		return nil, false, err
	}
	cands, err := array(obj.Get("candidates"))
	if err != nil {
		return nil, false, err
	}
	changed := false
	var esc []byte
	kept := make([][]byte, 0, len(cands))
	for k, raw := range cands {
		if k >= len(r.s.chunks[n]) {
			kept = append(kept, raw)
			continue
		}
		cc := r.s.chunks[n][k]
		c, drop, e, err := r.candidate(raw, cc, n)
		if err != nil {
			return nil, false, err
		}
		if e != nil && esc == nil {
			esc = e
		}
		if c != nil || drop {
			changed = true
		}
		if c == nil {
			c = raw
		}
		if !drop {
			kept = append(kept, c)
		}
	}
	if !changed {
		return nil, true, nil
	}
	obj = append(jsonx.Object(nil), obj...)
	if len(kept) == 0 {
		obj = obj.Delete("candidates")
		if !obj.Has("usageMetadata") && !obj.Has("promptFeedback") {
			return nil, false, nil
		}
	} else {
		obj = obj.Set("candidates", jsonx.AppendArray(nil, kept))
	}
	if esc != nil {
		obj = obj.Set("toolgate_escalation", esc)
	}
	return obj.Bytes(), true, nil
}

// candidate renders one candidate of held chunk n: nil for unchanged,
// drop when nothing of it remains in this chunk, and the escalation object
// when this chunk carries the replacement.
func (r *renderer) candidate(raw []byte, cc chunkCand, n int) (out []byte, drop bool, esc []byte, err error) {
	if cc.index >= len(r.actions) {
		return nil, false, nil, nil
	}
	act := &r.actions[cc.index]
	c, err := jsonx.ParseObject(raw)
	if err != nil {
		return nil, false, nil, err
	}
	c = append(jsonx.Object(nil), c...)
	if act.Kind != neutral.Respond {
		if !anyChanged(act) || jsonx.IsNull(c.Get("content")) {
			return nil, false, nil, nil
		}
		content, _, err := spliceCalls(c.Get("content"), act, cc.callsBefore, cc.open)
		if err != nil {
			return nil, false, nil, err
		}
		if parts, _ := contentParts(content); len(parts) == 0 && !has(c, "finishReason") {
			// It held only fragments of a repaired call, now written whole
			// where the call began.
			return nil, true, nil, nil
		}
		return c.Set("content", content).Bytes(), false, nil, nil
	}
	var before [][]byte
	if r.s.cands[cc.index].firstCall == n {
		before = textBeforeCall(c.Get("content"))
	}
	if r.last[cc.index] != n {
		if len(before) == 0 {
			return nil, true, nil, nil
		}
		return c.Set("content", textContent(c.Get("content"), before, "")).Delete(spelling(c, "finishReason")).Bytes(), false, nil, nil
	}
	c = c.Set("content", textContent(c.Get("content"), before, act.Text)).Set(spelling(c, "finishReason"), []byte(`"STOP"`))
	return c.Bytes(), false, escalationObject(act), nil
}

// textBeforeCall returns the visible text parts that precede the first
// functionCall of a content object.
func textBeforeCall(content []byte) [][]byte {
	parts, err := contentParts(content)
	if err != nil {
		return nil
	}
	var out [][]byte
	for _, raw := range parts {
		p, err := jsonx.ParseObject(raw)
		if err != nil || has(p, "functionCall") {
			break
		}
		if p.Has("text") && string(p.Get("thought")) != "true" {
			out = append(out, raw)
		}
	}
	return out
}
