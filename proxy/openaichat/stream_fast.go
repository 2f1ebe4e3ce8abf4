package openaichat

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// textDelta is what feedText read of one choice of a chunk. The byte
// slices alias the event's data and are consumed before Feed returns.
type textDelta struct {
	choice  int
	content []byte // raw JSON string, or nil
	finish  []byte // raw JSON string, or nil
	calls   []fastCall
}

// fastCall is one tool-call delta read by parseFastCalls; its fields are
// raw JSON strings aliasing the event's data, nil when absent.
type fastCall struct {
	index               int
	id, typ, name, args []byte
}

// scratch holds the slices feedText reuses from chunk to chunk, so reading
// a stream allocates for what it keeps, not for what it looks at.
type scratch struct {
	top, choice, delta, call, fn jsonx.Object
	choices, calls               [][]byte
	deltas                       []textDelta
	fcalls                       []fastCall
}

// feedText reads the common chunks (text and function-call deltas, role,
// finish, usage) without reflection: decoding every chunk into structs was
// most of a stream's CPU. It reports false, leaving the chunk to the full
// decoder, for anything else: an error, a custom call, or a field it does
// not know. Nothing changes until the whole chunk has been understood.
// opening reports a chunk that carries nothing yet: no text, call, finish,
// logprobs or usage (a role-only delta, or no choices at all). Only such a
// chunk that feedText understood is called opening: one with a field it
// does not know may carry something.
func (s *stream) feedText(data []byte) (ok, opening bool, err error) {
	sc := &s.scratch
	// ParseObjectInto checks the JSON grammar as it splits; what it refuses,
	// the full decoder refuses too, with its own error. The values inside
	// are split with jsonx.Split*, which does not check them again.
	obj, err := jsonx.ParseObjectInto(sc.top, data)
	// An error chunk is the full decoder's to refuse.
	if err != nil || !jsonx.IsNull(obj.Get("error")) || misspelt(obj, "choices", "usage", "id", "error") {
		return false, false, nil
	}
	sc.top = obj
	choices := sc.choices[:0]
	if raw := obj.Get("choices"); !jsonx.IsNull(raw) {
		if choices, err = jsonx.SplitArrayInto(sc.choices, raw); err != nil {
			return false, false, nil
		}
		sc.choices = choices
	}
	deltas, quiet, ok, err := s.readTextChoices(choices)
	if !ok || err != nil {
		return false, false, err
	}
	s.applyText(deltas)
	if s.id == "" {
		s.id, _ = jsonx.Unquote(obj.Get("id"))
	}
	u := obj.Get("usage")
	if !jsonx.IsNull(u) {
		if usage, ok := readUsage(u); ok {
			s.usage = usage
		}
	}
	return true, quiet && jsonx.IsNull(u), nil
}

// readTextChoices reads every choice of a chunk into the scratch deltas,
// and checks their call indexes, before any is applied. quiet reports that
// no choice carries anything for the user.
func (s *stream) readTextChoices(choices [][]byte) (deltas []textDelta, quiet, ok bool, err error) {
	sc := &s.scratch
	deltas, fcalls := sc.deltas[:0], sc.fcalls[:0]
	quiet = true
	for _, raw := range choices {
		var d textDelta
		var q bool
		if d, fcalls, q, ok, err = s.readTextChoice(raw, fcalls); !ok || err != nil {
			return nil, false, false, err
		}
		quiet = quiet && q
		deltas = append(deltas, d)
	}
	sc.deltas, sc.fcalls = deltas, fcalls
	for _, d := range deltas {
		for _, fc := range d.calls {
			if fc.index < 0 || fc.index >= maxCalls {
				return nil, false, false, fmt.Errorf("%w: tool call index %d", ErrStream, fc.index)
			}
		}
	}
	return deltas, quiet, true, nil
}

// readTextChoice reads one choice of a chunk; its calls are appended to
// fcalls. quiet reports a choice with no text, call, finish or logprobs.
func (s *stream) readTextChoice(raw []byte, fcalls []fastCall) (d textDelta, _ []fastCall, quiet, ok bool, err error) {
	sc := &s.scratch
	co, err := jsonx.SplitObjectInto(sc.choice, raw)
	if err != nil || misspelt(co, "index", "delta", "finish_reason") {
		return d, fcalls, false, false, nil
	}
	sc.choice = co
	idx, err := strconv.Atoi(string(co.Get("index")))
	if err != nil {
		return d, fcalls, false, false, nil
	}
	if idx < 0 || idx >= maxChoices {
		return d, fcalls, false, false, fmt.Errorf("%w: choice index %d", ErrStream, idx)
	}
	d.choice = idx
	if fr := co.Get("finish_reason"); !jsonx.IsNull(fr) {
		if fr[0] != '"' {
			return d, fcalls, false, false, nil
		}
		d.finish = fr
	}
	if dr := co.Get("delta"); !jsonx.IsNull(dr) {
		if fcalls, ok = s.readTextDelta(&d, dr, fcalls); !ok {
			return d, fcalls, false, false, nil
		}
	}
	quiet = jsonx.IsNull(co.Get("logprobs")) && d.finish == nil && len(d.calls) == 0 &&
		(d.content == nil || string(d.content) == `""`)
	return d, fcalls, quiet, true, nil
}

// readTextDelta reads a choice's delta into d: its role, text and plain
// function-call fragments. Any other field is the full decoder's.
func (s *stream) readTextDelta(d *textDelta, raw []byte, fcalls []fastCall) ([]fastCall, bool) {
	delta, err := jsonx.SplitObjectInto(s.scratch.delta, raw)
	if err != nil {
		return fcalls, false
	}
	s.scratch.delta = delta
	for _, f := range delta {
		switch {
		case f.Key == "role":
		case (f.Key == "content" || f.Key == "refusal" || f.Key == "reasoning_content") && jsonx.IsNull(f.Value):
		case f.Key == "content" && f.Value[0] == '"':
			d.content = f.Value
		case f.Key == "tool_calls":
			first := len(fcalls)
			var ok bool
			if fcalls, ok = s.parseFastCalls(fcalls, f.Value); !ok {
				return fcalls, false
			}
			d.calls = fcalls[first:len(fcalls):len(fcalls)]
		default:
			return fcalls, false
		}
	}
	return fcalls, true
}

// applyText applies the deltas of a chunk feedText understood whole.
func (s *stream) applyText(deltas []textDelta) {
	for _, d := range deltas {
		c, _ := s.choice(d.choice) // in range: checked by readTextChoice
		if d.content != nil {
			c.content = appendFragment(c.content, d.content)
			c.hasText = true
		}
		for _, fc := range d.calls {
			call := c.call(fc.index)
			id, _ := jsonx.Unquote(fc.id)
			typ, _ := jsonx.Unquote(fc.typ)
			call.identify(id, typ)
			if fc.name != nil {
				n, _ := jsonx.Unquote(fc.name)
				call.name += n
			}
			call.args = appendFragment(call.args, fc.args)
			s.call = true
		}
		if d.finish != nil {
			c.finish, _ = jsonx.Unquote(d.finish)
		}
	}
}

// misspelt reports a key that matches one of names only when case is
// ignored. encoding/json, and so the full decoder, matches keys that way; a
// chunk that spells "Choices" must be read as the full decoder reads it, or
// a call could slip past unseen. names are lower-case ASCII.
func misspelt(obj jsonx.Object, names ...string) bool {
	for _, f := range obj {
		if !jsonx.MayFold(f.Key) {
			continue
		}
		for _, n := range names {
			if f.Key != n && strings.EqualFold(f.Key, n) {
				return true
			}
		}
	}
	return false
}

// parseFastCalls appends the tool_calls of a delta to dst when they have
// the plain function shape. Anything else (custom calls, arguments that are
// not a string, unknown fields) goes to the full decoder.
func (s *stream) parseFastCalls(dst []fastCall, raw []byte) ([]fastCall, bool) {
	sc := &s.scratch
	elems, err := jsonx.SplitArrayInto(sc.calls, raw)
	if err != nil {
		return dst, false
	}
	sc.calls = elems
	for _, e := range elems {
		fc, ok := s.parseFastCall(e)
		if !ok {
			return dst, false
		}
		dst = append(dst, fc)
	}
	return dst, true
}

// parseFastCall reads one call delta of the plain function shape, which
// must name its index.
func (s *stream) parseFastCall(raw []byte) (fc fastCall, ok bool) {
	obj, err := jsonx.SplitObjectInto(s.scratch.call, raw)
	if err != nil {
		return fc, false
	}
	s.scratch.call = obj
	seenIndex := false
	for _, f := range obj {
		switch f.Key {
		case "index":
			if fc.index, err = strconv.Atoi(string(f.Value)); err != nil {
				return fc, false
			}
			seenIndex = true
		case "id":
			if f.Value[0] != '"' {
				return fc, false
			}
			fc.id = f.Value
		case "type":
			if string(f.Value) != `"function"` {
				return fc, false
			}
			fc.typ = f.Value
		case "function":
			if !s.parseFastFunction(f.Value, &fc) {
				return fc, false
			}
		default:
			return fc, false
		}
	}
	return fc, seenIndex
}

func (s *stream) parseFastFunction(raw []byte, fc *fastCall) bool {
	obj, err := jsonx.SplitObjectInto(s.scratch.fn, raw)
	if err != nil {
		return false
	}
	s.scratch.fn = obj
	for _, f := range obj {
		switch {
		case (f.Key == "name" || f.Key == "arguments") && jsonx.IsNull(f.Value):
		case f.Key == "name" && f.Value[0] == '"':
			fc.name = f.Value
		case f.Key == "arguments" && f.Value[0] == '"':
			fc.args = f.Value
		default:
			return false
		}
	}
	return true
}
