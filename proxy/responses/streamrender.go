package responses

import (
	"encoding/json"
	"strconv"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// renderer writes the events that replace the held ones. Every event it
// writes that carries a sequence_number is renumbered from the one after
// the last number the client got, so numbers stay contiguous whatever was
// dropped or added.
type renderer struct {
	s    *stream
	out  []byte
	next int64

	// newID is the response id the client continues from, when it changes.
	newID string
	// changed maps an output_index to its repaired call.
	changed map[int]*neutral.ToolCall
	// ids maps an output_index to the ids its call item takes.
	ids map[int]callIDs
	// doneSent marks repaired calls whose arguments done event went out.
	doneSent map[int]bool

	// replace is set when the held output becomes one message item.
	replace  bool
	text     string
	escBody  []byte
	msgID    string
	msgIndex int
	msgSent  bool
}

// callIndexes returns the output_index of each call, in Turn order.
func (s *stream) callIndexes() []int {
	var out []int
	for _, i := range s.order() {
		if isCallType(s.items[i].typ) {
			out = append(out, i)
		}
	}
	return out
}

// Encode implements api.Stream. Held events that nothing touches go out as
// the upstream sent them (renumbered if needed). A repaired call keeps its
// output_index, item id and call_id: its output_item.added carries the new
// name and empty arguments, one delta carries the whole new arguments, its
// original deltas are dropped, and its done events carry the new call. An
// answer that responds with text (an escalation in message mode, an
// abstention) loses every held item; one message item with the text takes
// the first one's place. The terminal event's response always matches what
// was sent.
func (s *stream) Encode(held []neutral.HeldEvent, actions []neutral.Action, sent api.Sent) ([]byte, error) {
	r := &renderer{s: s, next: sent.Next, doneSent: map[int]bool{}}
	if len(actions) > 0 {
		// The stored ids change only while the client has none of them:
		// the response id goes out with the stream's first event.
		r.plan(&actions[0], s.info.stored() && sent.Events == 0)
	}
	for _, h := range held {
		if err := r.event(h.Event, h.Raw, h.Data); err != nil {
			return nil, err
		}
	}
	return r.out, nil
}

// plan reads the pipeline's action for the answer.
func (r *renderer) plan(act *neutral.Action, stored bool) {
	s := r.s
	switch {
	case act.Kind == neutral.Respond:
		r.replace = true
		r.text = act.Text
		r.escBody, r.msgID = replacement(act)
		r.msgIndex = -1
		for i, it := range s.items {
			if it.afterCall && (r.msgIndex < 0 || i < r.msgIndex) {
				r.msgIndex = i
			}
		}
		r.newID = chainedID(stored, act.ReQueries, false)
	case replaces(act):
		at := s.callIndexes()
		r.changed = map[int]*neutral.ToolCall{}
		for j := range act.Changed {
			if act.ChangedAt(j) && j < len(at) {
				r.changed[at[j]] = &act.Calls[j]
			}
		}
		if stored {
			r.ids = map[int]callIDs{}
			for j, id := range chainedCallIDs(act) {
				if j < len(at) {
					r.ids[at[j]] = id
				}
			}
		}
		r.newID = chainedID(stored, act.ReQueries, true)
	}
}

// eventFields is what the renderer reads of every event.
type eventFields struct {
	Type        string          `json:"type"`
	Seq         json.RawMessage `json:"sequence_number"`
	OutputIndex *int            `json:"output_index"`
}

// event renders one held event.
func (r *renderer) event(name string, raw, data []byte) error {
	if len(data) == 0 {
		r.out = append(r.out, raw...)
		return nil
	}
	var e eventFields
	if err := json.Unmarshal(data, &e); err != nil {
		return err
	}
	typ := e.Type
	if typ == "" {
		typ = name
	}
	seq, hasSeq := parseSeq(e.Seq)
	idx := -1
	if e.OutputIndex != nil {
		idx = *e.OutputIndex
	}
	switch {
	case typ == evCompleted || typ == evIncomplete || typ == evFailed:
		return r.terminal(name, typ, data, hasSeq)
	case typ == evCreated || typ == evInProgress || typ == evQueued:
		if r.newID == "" {
			break
		}
		obj, err := jsonx.ParseObject(data)
		if err != nil {
			return err
		}
		resp, err := jsonx.ParseObject(obj.Get("response"))
		if err != nil {
			return err
		}
		r.emit(name, obj.Set("response", resp.Set("id", jsonx.String(r.newID)).Bytes()), hasSeq)
		return nil
	case idx < 0:
	case r.replace:
		if it := r.s.items[idx]; it != nil && it.afterCall {
			if !r.msgSent {
				r.message(hasSeq)
			}
			return nil
		}
	case r.changed[idx] != nil:
		return r.repaired(name, typ, idx, data, hasSeq)
	default:
		if id, ok := r.ids[idx]; ok {
			return r.reIDed(name, typ, id, data, hasSeq)
		}
	}
	r.emitRaw(name, raw, data, seq, hasSeq)
	return nil
}

// emit writes an event, numbering it when the stream numbers its events.
// Events toolgate writes itself carry a placeholder number right after
// their type, where the API puts it.
func (r *renderer) emit(name string, obj jsonx.Object, numbered bool) {
	if numbered {
		obj = obj.Set("sequence_number", []byte(strconv.FormatInt(r.next, 10)))
		r.next++
	} else {
		obj = obj.Delete("sequence_number")
	}
	r.out = sse.AppendEvent(r.out, name, obj.Bytes())
}

// emitRaw writes an unchanged event: its own bytes when its number is
// already right, else the event renumbered.
func (r *renderer) emitRaw(name string, raw, data []byte, seq int64, numbered bool) {
	if !numbered || seq == r.next {
		if numbered {
			r.next++
		}
		r.out = append(r.out, raw...)
		return
	}
	obj, err := jsonx.ParseObject(data)
	if err != nil {
		// Feed read this event as JSON, so this cannot happen; the bytes
		// still go out rather than nothing.
		r.out = append(r.out, raw...)
		return
	}
	r.emit(name, obj, true)
}

// argsEvents names the delta and done events and the field of a call kind.
func argsEvents(k neutral.Kind) (delta, done, field string) {
	if k == neutral.Custom {
		return evInputDelta, evInputDone, "input"
	}
	return evArgsDelta, evArgsDone, "arguments"
}

// repaired renders an event of a call that was replaced.
func (r *renderer) repaired(name, typ string, idx int, data []byte, numbered bool) error {
	nc := r.changed[idx]
	ids := r.ids[idx]
	it := r.s.items[idx]
	itemID := ids.itemID
	if itemID == "" {
		itemID = it.id
	}
	deltaType, doneType, field := argsEvents(nc.Kind)
	obj, err := jsonx.ParseObject(data)
	if err != nil {
		return err
	}
	switch typ {
	case evItemAdded:
		item, err := spliceCall(obj.Get("item"), nc, ids, true)
		if err != nil {
			return err
		}
		r.emit(name, obj.Set("item", item), numbered)
		r.emitArgs(eventName(name, deltaType), deltaType, "delta", itemID, idx, nc.Args, numbered)
	case evArgsDelta, evInputDelta:
		// The whole new arguments went out with the item.
	case evArgsDone, evInputDone:
		r.doneSent[idx] = true
		obj = obj.Set("type", jsonx.String(doneType)).Delete("arguments").Delete("input")
		obj = obj.Set("item_id", jsonx.String(itemID)).Set(field, jsonx.String(string(nc.Args)))
		if obj.Has("name") {
			obj = obj.Set("name", jsonx.String(nc.Name))
		}
		r.emit(eventName(name, doneType), obj, numbered)
	case evItemDone:
		if !r.doneSent[idx] {
			// The upstream skipped the done event; the client's SDK may
			// wait for it, so the repaired call gets one.
			r.doneSent[idx] = true
			r.emitArgs(eventName(name, doneType), doneType, field, itemID, idx, nc.Args, numbered)
		}
		item, err := spliceCall(obj.Get("item"), nc, ids, false)
		if err != nil {
			return err
		}
		r.emit(name, obj.Set("item", item), numbered)
	default:
		if obj.Has("item_id") {
			obj = obj.Set("item_id", jsonx.String(itemID))
		}
		r.emit(name, obj, numbered)
	}
	return nil
}

// emitArgs writes an arguments event toolgate makes itself for a repaired
// call: a delta (key "delta") or a done event (key the call's field).
func (r *renderer) emitArgs(name, typ, key, itemID string, idx int, args []byte, numbered bool) {
	r.emit(name, jsonx.Object{
		{Key: "type", Value: jsonx.String(typ)},
		{Key: "sequence_number", Value: []byte("0")},
		{Key: "item_id", Value: jsonx.String(itemID)},
		{Key: "output_index", Value: []byte(strconv.Itoa(idx))},
		{Key: key, Value: jsonx.String(string(args))},
	}, numbered)
}

// reIDed renders an event of a call that keeps its name and arguments but
// takes the ids the chained conversation stored for it.
func (r *renderer) reIDed(name, typ string, ids callIDs, data []byte, numbered bool) error {
	obj, err := jsonx.ParseObject(data)
	if err != nil {
		return err
	}
	if typ == evItemAdded || typ == evItemDone {
		item, err := spliceCall(obj.Get("item"), nil, ids, false)
		if err != nil {
			return err
		}
		obj = obj.Set("item", item)
	} else if obj.Has("item_id") && ids.itemID != "" {
		obj = obj.Set("item_id", jsonx.String(ids.itemID))
	}
	r.emit(name, obj, numbered)
	return nil
}

// eventName is the SSE event line for a rewritten event: the upstream
// names events by their type, so a renamed event is named likewise.
func eventName(orig, typ string) string {
	if orig == "" {
		return ""
	}
	return typ
}

// message writes the events of the message item that replaces the held
// output, at the first replaced item's output_index.
func (r *renderer) message(numbered bool) {
	r.msgSent = true
	idx := []byte(strconv.Itoa(r.msgIndex))
	id := jsonx.String(r.msgID)
	text := jsonx.String(r.text)
	ev := func(typ string, fields ...jsonx.Field) {
		obj := jsonx.Object{{Key: "type", Value: jsonx.String(typ)}, {Key: "sequence_number", Value: []byte("0")}}
		r.emit(typ, append(obj, fields...), numbered)
	}
	emptyPart := textPart("")
	ev(evItemAdded, jsonx.Field{Key: "output_index", Value: idx},
		jsonx.Field{Key: "item", Value: messageItem(r.msgID, "", "in_progress")})
	ev(evPartAdded, jsonx.Field{Key: "item_id", Value: id}, jsonx.Field{Key: "output_index", Value: idx},
		jsonx.Field{Key: "content_index", Value: []byte("0")}, jsonx.Field{Key: "part", Value: emptyPart})
	ev(evTextDelta, jsonx.Field{Key: "item_id", Value: id}, jsonx.Field{Key: "output_index", Value: idx},
		jsonx.Field{Key: "content_index", Value: []byte("0")}, jsonx.Field{Key: "delta", Value: text},
		jsonx.Field{Key: "logprobs", Value: []byte("[]")})
	ev(evTextDone, jsonx.Field{Key: "item_id", Value: id}, jsonx.Field{Key: "output_index", Value: idx},
		jsonx.Field{Key: "content_index", Value: []byte("0")}, jsonx.Field{Key: "text", Value: text},
		jsonx.Field{Key: "logprobs", Value: []byte("[]")})
	ev(evPartDone, jsonx.Field{Key: "item_id", Value: id}, jsonx.Field{Key: "output_index", Value: idx},
		jsonx.Field{Key: "content_index", Value: []byte("0")}, jsonx.Field{Key: "part", Value: textPart(r.text)})
	ev(evItemDone, jsonx.Field{Key: "output_index", Value: idx},
		jsonx.Field{Key: "item", Value: messageItem(r.msgID, r.text, "completed")})
}

// terminal rewrites the last event's response so that it matches what the
// client was sent.
func (r *renderer) terminal(name, typ string, data []byte, numbered bool) error {
	obj, err := jsonx.ParseObject(data)
	if err != nil {
		return err
	}
	resp, err := jsonx.ParseObject(obj.Get("response"))
	if err != nil {
		return err
	}
	if r.newID != "" {
		resp = resp.Set("id", jsonx.String(r.newID))
	}
	var items [][]byte
	if out := resp.Get("output"); out != nil {
		if items, err = jsonx.ParseArray(out); err != nil {
			return err
		}
		items = append([][]byte(nil), items...)
	}
	if !r.replace {
		if resp, err = r.repairedOutput(resp, items); err != nil {
			return err
		}
		r.emit(name, obj.Set("response", resp.Bytes()), numbered)
		return nil
	}
	if !r.msgSent {
		r.message(numbered)
	}
	resp = r.replacedOutput(resp, items)
	if typ == evIncomplete {
		// The answer the client gets is complete: a message.
		resp = resp.Set("status", []byte(`"completed"`))
		typ = evCompleted
		obj = obj.Set("type", jsonx.String(typ))
		name = eventName(name, typ)
	}
	r.emit(name, obj.Set("response", resp.Bytes()), numbered)
	return nil
}

// replacedOutput is the terminal response of an answer that responds with
// text: the items that went out before the hold, then the message item.
func (r *renderer) replacedOutput(resp jsonx.Object, items [][]byte) jsonx.Object {
	var kept [][]byte
	for i, item := range items {
		if it := r.s.items[i]; it == nil || !it.afterCall {
			kept = append(kept, item)
		}
	}
	msg := messageItem(r.msgID, r.text, "completed")
	resp = replaceOutput(resp, msg, r.text)
	resp = resp.Set("output", jsonx.AppendArray(nil, append(kept, msg)))
	if r.escBody != nil {
		resp = resp.Set("toolgate_escalation", r.escBody)
	}
	return resp
}

// repairedOutput splices the repaired calls and the stored ids into the
// terminal response's output.
func (r *renderer) repairedOutput(resp jsonx.Object, items [][]byte) (jsonx.Object, error) {
	for i := range items {
		nc := r.changed[i]
		ids, reID := r.ids[i]
		if nc == nil && !reID {
			continue
		}
		var err error
		if items[i], err = spliceCall(items[i], nc, ids, false); err != nil {
			return nil, err
		}
	}
	if items != nil {
		resp = resp.Set("output", jsonx.AppendArray(nil, items))
	}
	return resp, nil
}
