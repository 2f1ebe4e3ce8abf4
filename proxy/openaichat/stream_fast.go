package openaichat

import (
	"fmt"
	"strconv"

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

// chunkKeys and choiceKeys are the members feedText looks up in a chunk
// and in each of its choices.
var (
	chunkKeys  = [4]string{"error", "choices", "id", "usage"}
	choiceKeys = [4]string{"index", "finish_reason", "delta", "logprobs"}
)

// scratch holds the slices feedText reuses from chunk to chunk, so reading
// a stream allocates for what it keeps, not for what it looks at.
type scratch struct {
	deltas []textDelta
	fcalls []fastCall
}

// feedText reads the common chunks (text and function-call deltas, role,
// finish, usage) from the chunk's tape, without reflection: decoding every
// chunk into structs was most of a stream's CPU. It reports false, leaving
// the chunk to the full decoder, for anything else: an error, a custom
// call, or a field it does not know. Nothing changes until the whole chunk
// has been understood. opening reports a chunk that carries nothing yet:
// no text, call, finish, logprobs or usage (a role-only delta, or no
// choices at all). Only such a chunk that feedText understood is called
// opening: one with a field it does not know may carry something.
func (s *stream) feedText(tx *jsonx.Text) (ok, opening bool, err error) {
	// An error chunk is the full decoder's to refuse. A key that
	// encoding/json, and so the full decoder, would match to one of the
	// keys read here only when case is ignored ("Choices") is no concern:
	// they are all protocol keys, and Feed has refused such a chunk.
	var top [4]int
	tx.Lookup(0, chunkKeys[:], top[:])
	errAt, choices, id, u := top[0], top[1], top[2], top[3]
	if tx.Kind(0) != '{' || !tx.Null(errAt) {
		return false, false, nil
	}
	if !tx.Null(choices) && tx.Kind(choices) != '[' {
		return false, false, nil
	}
	deltas, quiet, ok, err := s.readTextChoices(tx, choices)
	if !ok || err != nil {
		return false, false, err
	}
	s.applyText(tx, deltas)
	if s.id == "" {
		s.id, _ = tx.Str(id)
	}
	if !tx.Null(u) {
		if usage, ok := tapeUsage(tx, u); ok {
			s.usage = usage
		}
	}
	return true, quiet && tx.Null(u), nil
}

// readTextChoices reads every choice of the array at node choices (-1 or
// null: none) into the scratch deltas, and checks their call indexes,
// before any is applied. quiet reports that no choice carries anything
// for the user.
func (s *stream) readTextChoices(tx *jsonx.Text, choices int) (deltas []textDelta, quiet, ok bool, err error) {
	sc := &s.scratch
	deltas, fcalls := sc.deltas[:0], sc.fcalls[:0]
	quiet = true
	n := 0
	if !tx.Null(choices) {
		n = tx.Len(choices)
	}
	for k, c := 0, choices+1; k < n; k, c = k+1, tx.Next(c) {
		var d textDelta
		var q bool
		if d, fcalls, q, ok, err = s.readTextChoice(tx, c, fcalls); !ok || err != nil {
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

// readTextChoice reads the choice at node c; its calls are appended to
// fcalls. quiet reports a choice with no text, call, finish or logprobs.
func (s *stream) readTextChoice(tx *jsonx.Text, c int, fcalls []fastCall) (d textDelta, _ []fastCall, quiet, ok bool, err error) {
	if tx.Kind(c) != '{' {
		return d, fcalls, false, false, nil
	}
	var at [4]int
	tx.Lookup(c, choiceKeys[:], at[:])
	index, fr, dr, logprobs := at[0], at[1], at[2], at[3]
	idx, err := strconv.Atoi(string(tx.Raw(index)))
	if err != nil {
		return d, fcalls, false, false, nil
	}
	if idx < 0 || idx >= maxChoices {
		return d, fcalls, false, false, fmt.Errorf("%w: choice index %d", ErrStream, idx)
	}
	d.choice = idx
	if !tx.Null(fr) {
		if tx.Kind(fr) != '"' {
			return d, fcalls, false, false, nil
		}
		d.finish = tx.Raw(fr)
	}
	if !tx.Null(dr) {
		if fcalls, ok = readTextDelta(tx, &d, dr, fcalls); !ok {
			return d, fcalls, false, false, nil
		}
	}
	quiet = tx.Null(logprobs) && d.finish == nil && len(d.calls) == 0 &&
		(d.content == nil || string(d.content) == `""`)
	return d, fcalls, quiet, true, nil
}

// readTextDelta reads the delta at node dr into d: its role, text and
// plain function-call fragments. Any other field is the full decoder's.
func readTextDelta(tx *jsonx.Text, d *textDelta, dr int, fcalls []fastCall) ([]fastCall, bool) {
	if tx.Kind(dr) != '{' {
		return fcalls, false
	}
	var buf [32]byte
	for k, j := 0, dr+1; k < tx.Len(dr); k, j = k+1, tx.Next(j+1) {
		v := j + 1
		name := tx.Name(j, buf[:0])
		switch {
		case string(name) == "role":
		case (string(name) == "content" || string(name) == "refusal" || string(name) == "reasoning_content") && tx.Null(v):
		case string(name) == "content" && tx.Kind(v) == '"':
			d.content = tx.Raw(v)
		case string(name) == "tool_calls":
			first := len(fcalls)
			var ok bool
			if fcalls, ok = parseFastCalls(tx, fcalls, v); !ok {
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
func (s *stream) applyText(tx *jsonx.Text, deltas []textDelta) {
	for _, d := range deltas {
		c, _ := s.choice(d.choice) // in range: checked by readTextChoice
		if d.content != nil {
			c.content = fragment(tx, c.content, d.content)
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
			call.args = fragment(tx, call.args, fc.args)
			s.call = true
		}
		if d.finish != nil {
			c.finish, _ = jsonx.Unquote(d.finish)
		}
	}
}

// parseFastCalls appends the tool_calls at node v of a delta to dst when
// they have the plain function shape. Anything else (custom calls,
// arguments that are not a string, unknown fields) goes to the full
// decoder.
func parseFastCalls(tx *jsonx.Text, dst []fastCall, v int) ([]fastCall, bool) {
	if tx.Kind(v) != '[' {
		return dst, false
	}
	for k, e := 0, v+1; k < tx.Len(v); k, e = k+1, tx.Next(e) {
		fc, ok := parseFastCall(tx, e)
		if !ok {
			return dst, false
		}
		dst = append(dst, fc)
	}
	return dst, true
}

// parseFastCall reads the call delta at node e, of the plain function
// shape, which must name its index.
func parseFastCall(tx *jsonx.Text, e int) (fc fastCall, ok bool) {
	if tx.Kind(e) != '{' {
		return fc, false
	}
	seenIndex := false
	var buf [32]byte
	for k, j := 0, e+1; k < tx.Len(e); k, j = k+1, tx.Next(j+1) {
		v := j + 1
		switch string(tx.Name(j, buf[:0])) {
		case "index":
			var err error
			if fc.index, err = strconv.Atoi(string(tx.Raw(v))); err != nil {
				return fc, false
			}
			seenIndex = true
		case "id":
			if tx.Kind(v) != '"' {
				return fc, false
			}
			fc.id = tx.Raw(v)
		case "type":
			if string(tx.Raw(v)) != `"function"` {
				return fc, false
			}
			fc.typ = tx.Raw(v)
		case "function":
			if !parseFastFunction(tx, v, &fc) {
				return fc, false
			}
		default:
			return fc, false
		}
	}
	return fc, seenIndex
}

// parseFastFunction reads the function object at node v into fc.
func parseFastFunction(tx *jsonx.Text, v int, fc *fastCall) bool {
	if tx.Kind(v) != '{' {
		return false
	}
	var buf [32]byte
	for k, j := 0, v+1; k < tx.Len(v); k, j = k+1, tx.Next(j+1) {
		fv := j + 1
		name := tx.Name(j, buf[:0])
		switch {
		case (string(name) == "name" || string(name) == "arguments") && tx.Null(fv):
		case string(name) == "name" && tx.Kind(fv) == '"':
			fc.name = tx.Raw(fv)
		case string(name) == "arguments" && tx.Kind(fv) == '"':
			fc.args = tx.Raw(fv)
		default:
			return false
		}
	}
	return true
}

// fragment is appendFragment for a string of the chunk read into tx:
// when the chunk is UTF-8, its escapes are checked already and it is
// decoded without checking them again.
func fragment(tx *jsonx.Text, dst, raw []byte) []byte {
	if tx.NotUTF8 || len(raw) < 2 {
		return appendFragment(dst, raw)
	}
	return jsonx.AppendChecked(dst, raw[1:len(raw)-1])
}
