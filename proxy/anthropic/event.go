package anthropic

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// ErrStream reports an event that cannot be read.
var ErrStream = errors.New("anthropic: unreadable stream event")

func errStream(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrStream, fmt.Sprintf(format, args...))
}

// eventKeys are the keys the stream reads in its events. A key that differs
// from one of them only in letter case is refused where it is read: a
// decoder that folds case would take it for the key while the agent's SDK
// ignores it, so what toolgate judged and what the agent runs could differ.
var eventKeys = jsonx.NewKeyFold("type", "index", "message", "id", "name", "usage", "content_block", "delta",
	"input", "input_tokens", "output_tokens", "text", "thinking", "signature", "partial_json", "citation", "stop_reason")

// event is what the stream reads of one event. Every event is read in one
// pass over its bytes, which also checks their grammar; nested values are
// then taken apart without checking them again.
type event struct {
	typ      string
	index    int
	hasIndex bool
	// message is set when the event carries a message object.
	message bool
	msgID   string
	// msgUsage is message_start's usage, when it has one.
	msgUsage *tokens
	// block and delta are content_block and delta as sent; nil when absent.
	block, delta []byte
	usage        tokens
}

// tokens is a usage object's counts; a count that is absent or null is
// not set.
type tokens struct {
	in, out       int64
	hasIn, hasOut bool
}

// readEvent reports the event types whose fields the stream reads. Only
// they must have their known shape; an event type added later, whatever its
// fields, passes with just its type read.
func readEvent(typ string) bool {
	switch typ {
	case "message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta":
		return true
	}
	return false
}

// decoder reads events, reusing its member slices from event to event.
type decoder struct {
	top, sub jsonx.Object
}

// decode reads an event's data into e. The type is the data's, else the
// SSE event name.
// Repeated keys are each checked, and the last one counts, as in
// encoding/json.
func (d *decoder) decode(data, name []byte, e *event) error {
	*e = event{}
	obj := d.top[:0]
	// Only the literal null stands for no members: data of whitespace
	// alone is no JSON, and a client that parses the event refuses it.
	if string(bytes.Trim(data, " \t\r\n")) != "null" {
		var err error
		if obj, err = jsonx.ParseObjectInto(d.top, data); err != nil {
			return errStream("%v", err)
		}
		d.top = obj
	}
	for _, f := range obj {
		if typeKey.Folds(f.Key) {
			return errStream("key %q is \"type\" in another letter case", f.Key)
		}
		if f.Key == "type" {
			t, ok := typeOf(f.Value)
			if !ok {
				return errStream("type is not a string")
			}
			e.typ = t
		}
	}
	if e.typ == "" {
		e.typ = string(name)
	}
	if !readEvent(e.typ) {
		return nil
	}
	for _, f := range obj {
		if err := e.field(f); err != nil {
			return errStream("%s: %v", e.typ, err)
		}
	}
	return nil
}

// field reads one member of an event.
func (e *event) field(f jsonx.Field) error {
	switch f.Key {
	case "type":
	case "index":
		e.hasIndex = !jsonx.IsNull(f.Value)
		if e.hasIndex {
			n, ok := jsonx.Int(f.Value)
			if !ok || n != int64(int(n)) {
				return errors.New("index is not an integer")
			}
			e.index = int(n)
		}
	case "message":
		return e.readMessage(f.Value)
	case "content_block":
		e.block = f.Value
	case "delta":
		e.delta = f.Value
	case "usage":
		return e.usage.read(f.Value, true)
	default:
		return folded(f.Key)
	}
	return nil
}

// folded refuses a key that is a key the stream reads in another letter
// case.
func folded(key string) error {
	if eventKeys.Folds(key) {
		return fmt.Errorf("key %q differs from a protocol key only in letter case", key)
	}
	return nil
}

// typeKey is checked in every event, read or not: the type says which
// events are read.
var typeKey = jsonx.NewKeyFold("type")

func (e *event) readMessage(raw []byte) error {
	if jsonx.IsNull(raw) {
		e.message, e.msgID, e.msgUsage = false, "", nil
		return nil
	}
	e.message = true
	obj, err := jsonx.SplitObject(raw)
	if err != nil {
		return errors.New("message is not an object")
	}
	for _, f := range obj {
		switch f.Key {
		case "id":
			id, ok := stringOf(f.Value)
			if !ok {
				return errors.New("message id is not a string")
			}
			e.msgID = id
		case "usage":
			if jsonx.IsNull(f.Value) {
				e.msgUsage = nil
				continue
			}
			if e.msgUsage == nil {
				e.msgUsage = &tokens{}
			}
			if err := e.msgUsage.read(f.Value, false); err != nil {
				return err
			}
		default:
			if err := folded(f.Key); err != nil {
				return err
			}
		}
	}
	return nil
}

// read takes the counts of a usage object. With nullUnsets, a null count
// unsets one read before, as a repeated key does in encoding/json.
func (t *tokens) read(raw []byte, nullUnsets bool) error {
	if jsonx.IsNull(raw) {
		*t = tokens{}
		return nil
	}
	obj, err := jsonx.SplitObject(raw)
	if err != nil {
		return errors.New("usage is not an object")
	}
	for _, f := range obj {
		var n *int64
		var has *bool
		switch f.Key {
		case "input_tokens":
			n, has = &t.in, &t.hasIn
		case "output_tokens":
			n, has = &t.out, &t.hasOut
		default:
			if err := folded(f.Key); err != nil {
				return err
			}
			continue
		}
		if jsonx.IsNull(f.Value) {
			if nullUnsets {
				*has = false
			}
			continue
		}
		v, ok := jsonx.Int(f.Value)
		if !ok {
			return fmt.Errorf("%s is not an integer", f.Key)
		}
		*n, *has = v, true
	}
	return nil
}

// usage is message_start's usage in neutral form.
func (t *tokens) usage() neutral.Usage { return neutral.Usage{Input: t.in, Output: t.out} }

// stringOf decodes a string member; null and absent are "".
func stringOf(raw []byte) (string, bool) {
	if jsonx.IsNull(raw) {
		return "", true
	}
	return jsonx.Unquote(raw)
}

// knownTypes are the event, block and delta types of the API. A type is
// read in every event; taking it from this list instead of decoding a new
// string each time keeps the hot path free of allocations.
var knownTypes = []string{
	"message_start", "content_block_start", "content_block_delta", "content_block_stop",
	"message_delta", "message_stop", "ping", "error",
	"text_delta", "input_json_delta", "thinking_delta", "signature_delta", "citations_delta",
	"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use",
}

// typeOf is stringOf for a type member.
func typeOf(raw []byte) (string, bool) {
	if len(raw) > 2 && raw[0] == '"' {
		for _, t := range knownTypes {
			if len(raw) == len(t)+2 && string(raw[1:len(raw)-1]) == t {
				return t, true
			}
		}
	}
	return stringOf(raw)
}

// stringContent is a string member's content as sent, between its quotes,
// for appending without a copy; nil for null or absent.
func stringContent(raw []byte) ([]byte, bool) {
	if jsonx.IsNull(raw) {
		return nil, true
	}
	if len(raw) < 2 || raw[0] != '"' {
		return nil, false
	}
	return raw[1 : len(raw)-1], true
}

// blockDelta is a content_block_delta's delta. Its string members are
// their content as sent; every one of them must be a string or null,
// whatever the delta's type.
type blockDelta struct {
	typ                                string
	text, thinking, signature, partial []byte
	hasPartial                         bool
	citation                           []byte
}

// blockDelta reads a content_block_delta's delta, which must be there.
func (d *decoder) blockDelta(raw []byte) (blockDelta, error) {
	var bd blockDelta
	if raw == nil {
		return bd, errStream("content_block_delta without a delta")
	}
	if jsonx.IsNull(raw) {
		return bd, nil
	}
	obj, err := jsonx.SplitObjectInto(d.sub, raw)
	if err != nil {
		return bd, errStream("content_block_delta: delta is not an object")
	}
	d.sub = obj
	for _, f := range obj {
		ok := true
		switch f.Key {
		case "type":
			bd.typ, ok = typeOf(f.Value)
		case "text":
			bd.text, ok = stringContent(f.Value)
		case "thinking":
			bd.thinking, ok = stringContent(f.Value)
		case "signature":
			bd.signature, ok = stringContent(f.Value)
		case "partial_json":
			bd.partial, ok = stringContent(f.Value)
			bd.hasPartial = !jsonx.IsNull(f.Value)
		case "citation":
			bd.citation = f.Value
		default:
			if err := folded(f.Key); err != nil {
				return bd, errStream("content_block_delta: %v", err)
			}
		}
		if !ok {
			return bd, errStream("content_block_delta: %s is not a string", f.Key)
		}
	}
	return bd, nil
}

// stopReason reads a message_delta's delta for its stop reason; set is
// false when the delta is null or has none.
func stopReason(raw []byte) (stop string, set bool, err error) {
	if jsonx.IsNull(raw) {
		return "", false, nil
	}
	obj, err := jsonx.SplitObject(raw)
	if err != nil {
		return "", false, errStream("message_delta: delta is not an object")
	}
	for _, f := range obj {
		if f.Key != "stop_reason" {
			if err := folded(f.Key); err != nil {
				return "", false, errStream("message_delta: %v", err)
			}
			continue
		}
		s, ok := stringOf(f.Value)
		if !ok {
			return "", false, errStream("message_delta: stop_reason is not a string")
		}
		stop, set = s, !jsonx.IsNull(f.Value)
	}
	return stop, set, nil
}
