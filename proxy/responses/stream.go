package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaiwire"
	"github.com/toolgate/toolgate/proxy/sse"
)

// maxItems bounds the output_index a stream may use, checked before
// anything is stored under it.
const maxItems = 4096

// ErrStream reports an event that cannot be read.
var ErrStream = errors.New("responses: unreadable stream event")

// Stream event types toolgate acts on.
const (
	evCreated    = "response.created"
	evInProgress = "response.in_progress"
	evQueued     = "response.queued"
	evItemAdded  = "response.output_item.added"
	evItemDone   = "response.output_item.done"
	evArgsDelta  = "response.function_call_arguments.delta"
	evArgsDone   = "response.function_call_arguments.done"
	evInputDelta = "response.custom_tool_call_input.delta"
	evInputDone  = "response.custom_tool_call_input.done"
	evTextDelta  = "response.output_text.delta"
	evCompleted  = "response.completed"
	evIncomplete = "response.incomplete"
	evFailed     = "response.failed"
	evError      = "error"
	evPartAdded  = "response.content_part.added"
	evPartDone   = "response.content_part.done"
	evTextDone   = "response.output_text.done"
)

// streamItem is what the stream has seen of one output item.
type streamItem struct {
	typ string
	// afterCall: the item is a call, or began after an event that began
	// one. The pipeline holds from the first call on, so when it
	// re-encodes, such an item was held and never reached the client.
	afterCall bool
	// final is the item of output_item.done, as sent.
	final []byte
	// added is the item of output_item.added, as sent.
	added []byte

	// Calls only.
	id, callID, name string
	args             []byte
	sawDelta         bool
	// done is the complete argument text a done event gave, if any.
	done     *string
	badShape bool
}

// stream follows one Responses stream.
//
// The stream's first events, response.created and response.in_progress,
// carry the response id and nothing for the user to see: Feed calls them
// opening, and the pipeline holds them until the first output event. An
// item that is not a call (text, reasoning, a hosted tool) releases them
// in front of itself, so text is not delayed; a call makes them the first
// held events. So when an answer starts with a call, the client has not
// been given the stored id yet, and a chained request can still be
// repaired and answered with the re-query's id instead of escalating
// stateful_unrecoverable. Feed reports each event's sequence_number and
// whether it gives a chained client the stored id; which of them went out
// is the pipeline's account, passed in to the methods that write.
type stream struct {
	api.SSEStream

	info requestInfo

	id               string
	status           string
	incompleteReason string
	usage            neutral.Usage
	text             []byte
	items            map[int]*streamItem

	// opening is true until the first event that is not a status event.
	opening bool
	// called: an event already fed began a call.
	called bool
}

// NewStream implements api.Codec.
func (c *codec) NewStream() api.Stream {
	return &stream{info: c.info, items: map[int]*streamItem{}, opening: true}
}

// eventHead is the part every event has.
type eventHead struct {
	Type string          `json:"type"`
	Seq  json.RawMessage `json:"sequence_number"`
}

func parseSeq(raw json.RawMessage) (int64, bool) {
	if jsonx.IsNull(raw) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil
}

// itemEvent is an event about one output item.
type itemEvent struct {
	OutputIndex *int            `json:"output_index"`
	Item        json.RawMessage `json:"item"`
	Delta       *string         `json:"delta"`
	Arguments   *string         `json:"arguments"`
	Input       *string         `json:"input"`
	Name        string          `json:"name"`
}

// responseEvent is a status or terminal event carrying the response.
type responseEvent struct {
	Response *struct {
		wireHead
		Output []json.RawMessage `json:"output"`
	} `json:"response"`
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrStream}, args...)...)
}

// Feed implements api.Stream.
func (s *stream) Feed(ev *sse.Event) (neutral.Step, error) {
	if ev.Comment || len(ev.Data) == 0 {
		return neutral.Step{}, nil
	}
	if string(ev.Data) == "[DONE]" {
		// Not part of the Responses grammar, but compatible servers that
		// reuse their Chat Completions framing end with it.
		return neutral.Step{Done: true}, nil
	}
	if api.ProtocolKeys.In(ev.Data) {
		return neutral.Step{}, api.ErrFoldedKey
	}
	var head eventHead
	if err := json.Unmarshal(ev.Data, &head); err != nil {
		return neutral.Step{}, errorf("%v", err)
	}
	typ := head.Type
	if typ == "" {
		typ = string(ev.Event)
	}
	step, err := s.read(typ, ev.Data)
	if err != nil || step.UpstreamError {
		return step, err
	}
	step.Seq, step.Numbered = parseSeq(head.Seq)
	// A stored answer's id, once out, is what the client continues from
	// (previous_response_id) whether or not this request chained: a repair
	// released under it would leave the client pointing at the stored bad
	// call (docs/apis.md, "Responses: ids after a repair").
	step.Commits = s.info.store && typ == evCreated
	if !step.Opening {
		s.opening = false
	}
	s.called = s.called || step.Hold
	return step, nil
}

// read takes in one event of type typ.
func (s *stream) read(typ string, data []byte) (neutral.Step, error) {
	switch typ {
	case evError:
		// The upstream's own error; the pipeline passes it on.
		return neutral.Step{UpstreamError: true}, nil
	case evCreated, evInProgress, evQueued:
		if err := s.readResponse(data); err != nil {
			return neutral.Step{}, err
		}
		if s.opening {
			return neutral.Step{Opening: true}, nil
		}
	case evItemAdded, evItemDone:
		hold, err := s.readItem(typ, data)
		if err != nil {
			return neutral.Step{}, err
		}
		return neutral.Step{Hold: hold}, nil
	case evArgsDelta, evInputDelta, evArgsDone, evInputDone:
		return neutral.Step{}, s.readArgs(typ, data)
	case evTextDelta:
		var e itemEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return neutral.Step{}, errorf("%v", err)
		}
		if e.Delta != nil {
			s.text = append(s.text, *e.Delta...)
		}
	case evCompleted, evIncomplete, evFailed:
		if err := s.readResponse(data); err != nil {
			return neutral.Step{}, err
		}
		hold, err := s.checkFinalOutput(data)
		if err != nil {
			return neutral.Step{}, err
		}
		return neutral.Step{Hold: hold, Done: true}, nil
	}
	return neutral.Step{}, nil
}

// readResponse records the id, status and usage of a status or terminal
// event.
func (s *stream) readResponse(data []byte) error {
	var e responseEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return errorf("%v", err)
	}
	if e.Response == nil {
		return errorf("a response event without its response")
	}
	r := e.Response
	if r.ID != "" {
		s.id = r.ID
	}
	s.status = r.Status
	if r.IncompleteDetails != nil {
		s.incompleteReason = r.IncompleteDetails.Reason
	}
	if r.Usage != nil {
		s.usage = r.usage()
	}
	return nil
}

// index reads an event's output_index within bounds.
func index(p *int) (int, error) {
	if p == nil {
		return 0, errorf("an item event without output_index")
	}
	if *p < 0 || *p >= maxItems {
		return 0, errorf("output_index %d", *p)
	}
	return *p, nil
}

// readItem follows output_item.added and output_item.done. It reports
// whether a call began, which starts the hold.
func (s *stream) readItem(typ string, data []byte) (bool, error) {
	var e itemEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return false, errorf("%v", err)
	}
	idx, err := index(e.OutputIndex)
	if err != nil {
		return false, err
	}
	var w wireItem
	if err := json.Unmarshal(e.Item, &w); err != nil {
		return false, errorf("item %d: %v", idx, err)
	}
	if typ == evItemAdded {
		if s.items[idx] != nil {
			return false, errorf("item %d added twice", idx)
		}
		s.items[idx] = &streamItem{typ: w.Type, added: bytes.Clone(e.Item), afterCall: s.called || isCallType(w.Type),
			id: w.ID, callID: w.CallID, name: w.Name}
		return isCallType(w.Type), nil
	}
	return s.itemDone(idx, &w, e.Item)
}

// itemDone follows output_item.done, which carries the item complete.
func (s *stream) itemDone(idx int, w *wireItem, item []byte) (bool, error) {
	it := s.items[idx]
	began := false
	if it == nil {
		// A done item that never began: take it whole. A call still has
		// to be held, or it would reach the client unjudged.
		it = &streamItem{typ: w.Type, afterCall: s.called || isCallType(w.Type), id: w.ID, callID: w.CallID, name: w.Name}
		s.items[idx] = it
		began = isCallType(w.Type)
	}
	if it.final != nil {
		return false, errorf("item %d done twice", idx)
	}
	if w.Type != it.typ {
		return false, errorf("item %d changed type", idx)
	}
	it.final = bytes.Clone(item)
	if !isCallType(it.typ) {
		return began, nil
	}
	if !agree(&it.name, w.Name) || !agree(&it.callID, w.CallID) || !agree(&it.id, w.ID) {
		return false, errorf("call %d changed its name or ids", idx)
	}
	field := w.Arguments
	if it.typ == typeCustomCall {
		field = w.Input
	}
	if jsonx.IsNull(field) {
		return began, nil
	}
	v, ok := jsonx.Unquote(field)
	if !ok {
		// Not a string: the wrong shape, judged as such.
		it.badShape = true
		it.args = append([]byte(nil), field...)
		return began, nil
	}
	return began, it.settle(idx, v)
}

// agree fills a field an earlier event left empty and reports whether a
// later event contradicts it.
func agree(field *string, v string) bool {
	if v == "" || *field == v {
		return true
	}
	if *field == "" {
		*field = v
		return true
	}
	return false
}

// settle records the complete arguments a done event gave. They must agree
// with the deltas and with any earlier done event: a stream that says two
// different things cannot be judged.
func (it *streamItem) settle(idx int, v string) error {
	if it.sawDelta && v != string(it.args) {
		return errorf("call %d: the complete arguments differ from the streamed ones", idx)
	}
	if it.done != nil && *it.done != v {
		return errorf("call %d: two different complete arguments", idx)
	}
	it.done = &v
	return nil
}

// readArgs follows the argument (or custom input) deltas and done events of
// a call.
func (s *stream) readArgs(typ string, data []byte) error {
	var e itemEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return errorf("%v", err)
	}
	idx, err := index(e.OutputIndex)
	if err != nil {
		return err
	}
	it := s.items[idx]
	want := typeFunctionCall
	if typ == evInputDelta || typ == evInputDone {
		want = typeCustomCall
	}
	if it == nil || it.typ != want {
		return errorf("arguments for output_index %d, which is not a %s", idx, want)
	}
	switch typ {
	case evArgsDelta, evInputDelta:
		if it.final != nil || it.done != nil {
			return errorf("call %d: a delta after the call was complete", idx)
		}
		if e.Delta == nil {
			return errorf("call %d: a delta without text", idx)
		}
		it.args = append(it.args, *e.Delta...)
		it.sawDelta = true
	default:
		v := e.Arguments
		if typ == evInputDone {
			v = e.Input
		}
		if v == nil {
			return nil
		}
		if !agree(&it.name, e.Name) {
			return errorf("call %d changed its name", idx)
		}
		return it.settle(idx, *v)
	}
	return nil
}

// checkFinalOutput holds the terminal event's output to the streamed items:
// the SDKs build their final response from it, so a call there must be
// exactly one that was judged. An item the stream never announced (some
// servers send only the terminal event) is taken from the output whole; a
// call taken so starts the hold, since it has not been judged yet.
func (s *stream) checkFinalOutput(data []byte) (bool, error) {
	var e responseEvent
	if err := json.Unmarshal(data, &e); err != nil || e.Response == nil {
		return false, errorf("a terminal event without its response")
	}
	began := false
	for idx, raw := range e.Response.Output {
		if idx >= maxItems {
			return false, errorf("output_index %d", idx)
		}
		var w wireItem
		if err := json.Unmarshal(raw, &w); err != nil {
			return false, errorf("final item %d: %v", idx, err)
		}
		it := s.items[idx]
		switch {
		case it == nil:
			s.items[idx] = s.finalItem(&w, raw)
			began = began || isCallType(w.Type)
		case isCallType(w.Type):
			if err := it.matchFinal(idx, &w); err != nil {
				return false, err
			}
		}
	}
	return began, nil
}

// finalItem is an item that only the terminal event's output carried.
func (s *stream) finalItem(w *wireItem, raw []byte) *streamItem {
	it := &streamItem{typ: w.Type, final: bytes.Clone(raw), afterCall: s.called || isCallType(w.Type),
		id: w.ID, callID: w.CallID, name: w.Name}
	if !isCallType(w.Type) {
		return it
	}
	field := w.Arguments
	if w.Type == typeCustomCall {
		field = w.Input
	}
	if v, ok := jsonx.Unquote(field); ok {
		it.done = &v
	} else if !jsonx.IsNull(field) {
		it.badShape, it.args = true, append([]byte(nil), field...)
	}
	return it
}

// matchFinal checks that the terminal event's call w at idx is the call
// that was streamed there.
func (it *streamItem) matchFinal(idx int, w *wireItem) error {
	if it.typ != w.Type || !agree(&it.name, w.Name) || !agree(&it.callID, w.CallID) {
		return errorf("the final output's item %d is not the streamed call", idx)
	}
	field := w.Arguments
	if w.Type == typeCustomCall {
		field = w.Input
	}
	v, ok := jsonx.Unquote(field)
	if !ok || it.badShape {
		if !(it.badShape && string(field) == string(it.args)) {
			return errorf("the final output's call %d differs from the streamed one", idx)
		}
		return nil
	}
	if v != string(it.finalArgs()) {
		return errorf("the final output's call %d differs from the streamed one", idx)
	}
	return nil
}

// finalArgs is the call's complete argument text.
func (it *streamItem) finalArgs() []byte {
	if it.done != nil {
		return []byte(*it.done)
	}
	return it.args
}

// order returns the output indexes seen, ascending.
func (s *stream) order() []int {
	idx := make([]int, 0, len(s.items))
	for i := range s.items {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	return idx
}

// Turns implements api.Stream. The one turn's Raw holds the output items
// rebuilt for replay: each item as its output_item.done carried it
// (reasoning items with their encrypted_content), or, for an item the
// stream never finished, what was streamed of it.
func (s *stream) Turns() []*neutral.Turn {
	var items [][]byte
	var calls []neutral.ToolCall
	var callAt []int
	for _, i := range s.order() {
		it := s.items[i]
		item := it.final
		if item == nil {
			item = it.rebuilt()
		}
		if isCallType(it.typ) {
			c := neutral.ToolCall{ID: it.callID, Name: it.name, Args: it.finalArgs(), Kind: neutral.Function, BadShape: it.badShape}
			if it.typ == typeCustomCall {
				c.Kind = neutral.Custom
			}
			calls = append(calls, c)
			callAt = append(callAt, len(items))
		}
		items = append(items, item)
	}
	t := &neutral.Turn{
		Calls:      calls,
		Text:       string(s.text),
		Usage:      s.usage,
		ResponseID: s.id,
		Raw:        &turnItems{items: items, callAt: callAt},
	}
	h := wireHead{Status: s.status}
	if s.incompleteReason != "" {
		h.IncompleteDetails = &struct {
			Reason string `json:"reason"`
		}{s.incompleteReason}
	}
	t.Stop = h.stop()
	return []*neutral.Turn{t}
}

// rebuilt is an unfinished item as far as it was streamed.
func (it *streamItem) rebuilt() []byte {
	if !isCallType(it.typ) {
		if it.added != nil {
			return it.added
		}
		return []byte(`{}`)
	}
	field := "arguments"
	if it.typ == typeCustomCall {
		field = "input"
	}
	o := jsonx.Object{{Key: "type", Value: jsonx.String(it.typ)}}
	if it.id != "" {
		o = o.Set("id", jsonx.String(it.id))
	}
	return o.Set("call_id", jsonx.String(it.callID)).Set("name", jsonx.String(it.name)).
		Set(field, jsonx.String(string(it.finalArgs()))).Bytes()
}

// Usage implements api.Stream.
func (s *stream) Usage() neutral.Usage { return s.usage }

// UpstreamError implements api.Stream: the upstream's error event as it
// came, or, when the held events before it were dropped, renumbered after
// the last event the client got, so sequence_number stays contiguous.
func (s *stream) UpstreamError(ev neutral.HeldEvent, sent api.Sent) []byte {
	if sent.Held == 0 {
		return append([]byte(nil), ev.Raw...)
	}
	o, err := jsonx.ParseObject(ev.Data)
	if err != nil {
		// Feed read it as an object already.
		return append([]byte(nil), ev.Raw...)
	}
	return sse.AppendEvent(nil, evError, o.Set("sequence_number", []byte(strconv.FormatInt(sent.Next, 10))).Bytes())
}

// ErrorEvent implements api.Stream: an `error` event numbered after the
// last event the client got. It carries an "error" object, so both
// openai-python and openai-go raise it instead of ending the stream as if
// it had completed.
func (s *stream) ErrorEvent(f neutral.Failure, esc *neutral.Escalated, sent api.Sent) []byte {
	seqRaw := []byte(strconv.FormatInt(sent.Next, 10))
	code, message, env := string(f.Code), f.Message, openaiwire.Error(f)
	if esc != nil {
		code, message, env = "tool_call_escalation", esc.Text, openaiwire.EscalationError(esc)
	}
	inner := []byte("null")
	if o, err := jsonx.ParseObject(env); err == nil && o.Has("error") {
		inner = o.Get("error")
	}
	data := jsonx.Object{
		{Key: "type", Value: []byte(`"error"`)},
		{Key: "code", Value: jsonx.String(code)},
		{Key: "message", Value: jsonx.String(message)},
		{Key: "param", Value: []byte("null")},
		{Key: "sequence_number", Value: seqRaw},
		{Key: "error", Value: inner},
	}
	return sse.AppendEvent(nil, evError, data.Bytes())
}
