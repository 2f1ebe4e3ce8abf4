package openaichat

import (
	"fmt"
	"strconv"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// textDelta is what feedText read of one choice of a chunk. Its values
// are nodes of the chunk's tape (-1: absent), so that the next chunk, read
// with the same nodes, is read by the same plan.
type textDelta struct {
	choice  int
	content int // a string
	finish  int // a string
	calls   []fastCall
	// still: the choice carries nothing but its content, which may be
	// empty (no finish, call or logprobs).
	still bool
}

// fastCall is one tool-call delta read by parseFastCalls; its fields are
// string nodes, -1 when absent.
type fastCall struct {
	index               int
	id, typ, name, args int
	// legacy: a delta.function_call, the last call of its delta.
	legacy bool
}

// firstFragmentCap is the room a text or a call's arguments start with.
const firstFragmentCap = 256

// chunkPlan is what feedText read of the last chunk, by node. A chunk that
// Follow read as the last one with one string changed, and with the same
// keys, has the same nodes: every decision feedText made of the last one
// holds for it, but where it was made on that string's value. Of values,
// feedText decides on a call's type alone (and on whether the text is
// empty, which is read again), so a chunk whose changed string is no
// call's type is read by the plan: its fragments, id, finish and usage are
// taken from the nodes the plan names. A text or arguments fragment is
// most chunks.
type chunkPlan struct {
	ok    bool
	id, u int
}

// chunkKeys and choiceKeys are the members feedText looks up in a chunk
// and in each of its choices.
var (
	chunkKeys  = [4]string{"error", "choices", "id", "usage"}
	choiceKeys = [4]string{"index", "finish_reason", "delta", "logprobs"}
	chunkFold  = jsonx.NewKeyFold(chunkKeys[:]...)
	choiceFold = jsonx.NewKeyFold(choiceKeys[:]...)
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
func (s *stream) feedText(tx *jsonx.Text, sameKeys bool) (ok, opening bool, err error) {
	if changed, short := tx.Changed(); short && sameKeys && s.plan.ok && !s.typeNode(changed) {
		return true, s.applyPlan(tx), nil
	}
	s.plan.ok = false
	// An error chunk is the full decoder's to refuse. A key that
	// encoding/json, and so the full decoder, would match to one of the
	// keys read here only when case is ignored ("Choices") is no concern:
	// they are all protocol keys, and Feed has refused such a chunk.
	// A member given twice, or in another letter case, is the full
	// decoder's to read: which one counts is its rule.
	var top [4]int
	if tx.Kind(0) != '{' || !tx.Members(0, chunkKeys[:], chunkFold, top[:]) {
		return false, false, nil
	}
	errAt, choices, id, u := top[0], top[1], top[2], top[3]
	if !tx.Null(errAt) {
		return false, false, nil
	}
	if !tx.Null(choices) && tx.Kind(choices) != '[' {
		return false, false, nil
	}
	if _, ok, err := s.readTextChoices(tx, choices); !ok || err != nil {
		return false, false, err
	}
	s.plan = chunkPlan{ok: true, id: id, u: u}
	return true, s.applyPlan(tx), nil
}

// applyPlan applies the chunk read into tx by the plan: its deltas, id and
// usage. opening reports a chunk that carries nothing yet.
func (s *stream) applyPlan(tx *jsonx.Text) (opening bool) {
	deltas := s.scratch.deltas
	s.applyText(tx, deltas)
	if s.id == "" {
		s.id, _ = tx.Str(s.plan.id)
	}
	if u := s.plan.u; !tx.Null(u) {
		if usage, ok := tapeUsage(tx, u); ok {
			s.usage = usage
		}
		return false
	}
	for _, d := range deltas {
		if !d.still || (d.content >= 0 && string(tx.Raw(d.content)) != `""`) {
			return false
		}
	}
	return true
}

// typeNode reports whether node i is the type of a call in the plan.
func (s *stream) typeNode(i int) bool {
	for _, d := range s.scratch.deltas {
		for _, fc := range d.calls {
			if fc.typ == i && i >= 0 {
				return true
			}
		}
	}
	return false
}

// readTextChoices reads every choice of the array at node choices (-1 or
// null: none) into the scratch deltas, and checks their call indexes,
// before any is applied.
func (s *stream) readTextChoices(tx *jsonx.Text, choices int) (deltas []textDelta, ok bool, err error) {
	sc := &s.scratch
	deltas, fcalls := sc.deltas[:0], sc.fcalls[:0]
	n := 0
	if !tx.Null(choices) {
		n = tx.Len(choices)
	}
	for k, c := 0, choices+1; k < n; k, c = k+1, tx.Next(c) {
		var d textDelta
		if d, fcalls, ok, err = readTextChoice(tx, c, fcalls); !ok || err != nil {
			return nil, false, err
		}
		deltas = append(deltas, d)
	}
	sc.deltas, sc.fcalls = deltas, fcalls
	for _, d := range deltas {
		for _, fc := range d.calls {
			if fc.index < 0 || fc.index >= maxCalls {
				return nil, false, fmt.Errorf("%w: tool call index %d", ErrStream, fc.index)
			}
		}
		if len(d.calls) > 0 && s.twoForms(d) {
			return nil, false, errStreamTwoForms
		}
	}
	return deltas, true, nil
}

// twoForms reports a delta whose calls and its choice's calls so far are
// not all of one form: tool_calls, or one legacy function_call. A chunk
// the plan reads has the keys of the last, so the same forms: only a chunk
// read afresh can bring the other.
func (s *stream) twoForms(d textDelta) bool {
	c := s.choices[d.choice]
	if !d.calls[len(d.calls)-1].legacy {
		return c != nil && c.legacy
	}
	return len(d.calls) > 1 || c != nil && len(c.calls) > 0 && !c.legacy
}

// readTextChoice reads the choice at node c; its calls are appended to
// fcalls.
func readTextChoice(tx *jsonx.Text, c int, fcalls []fastCall) (d textDelta, _ []fastCall, ok bool, err error) {
	d.content, d.finish = -1, -1
	if tx.Kind(c) != '{' {
		return d, fcalls, false, nil
	}
	var at [4]int
	if !tx.Members(c, choiceKeys[:], choiceFold, at[:]) {
		return d, fcalls, false, nil
	}
	index, fr, dr, logprobs := at[0], at[1], at[2], at[3]
	idx, err := strconv.Atoi(string(tx.Raw(index)))
	if err != nil {
		return d, fcalls, false, nil
	}
	if idx < 0 || idx >= maxChoices {
		return d, fcalls, false, fmt.Errorf("%w: choice index %d", ErrStream, idx)
	}
	d.choice = idx
	if !tx.Null(fr) {
		if tx.Kind(fr) != '"' {
			return d, fcalls, false, nil
		}
		d.finish = fr
	}
	if !tx.Null(dr) {
		if fcalls, ok = readTextDelta(tx, &d, dr, fcalls); !ok {
			return d, fcalls, false, nil
		}
	}
	d.still = tx.Null(logprobs) && d.finish < 0 && len(d.calls) == 0
	return d, fcalls, true, nil
}

// readTextDelta reads the delta at node dr into d: its role, text and
// plain function-call fragments, tool_calls or the legacy function_call
// (null beside every text delta, from servers that speak both forms).
// Any other field is the full decoder's.
func readTextDelta(tx *jsonx.Text, d *textDelta, dr int, fcalls []fastCall) ([]fastCall, bool) {
	if tx.Kind(dr) != '{' || tx.Repeats(dr) {
		return fcalls, false
	}
	var buf [32]byte
	legacy := -1
	for k, j := 0, dr+1; k < tx.Len(dr); k, j = k+1, tx.Next(j+1) {
		v := j + 1
		name := tx.Name(j, buf[:0])
		switch {
		case string(name) == "role":
		case (string(name) == "content" || string(name) == "refusal" || string(name) == "reasoning_content" ||
			string(name) == "function_call") && tx.Null(v):
		case string(name) == "content" && tx.Kind(v) == '"':
			d.content = v
		case string(name) == "tool_calls":
			first := len(fcalls)
			var ok bool
			if fcalls, ok = parseFastCalls(tx, fcalls, v); !ok {
				return fcalls, false
			}
			d.calls = fcalls[first:len(fcalls):len(fcalls)]
		case string(name) == "function_call":
			legacy = v
		default:
			return fcalls, false
		}
	}
	if legacy < 0 {
		return fcalls, true
	}
	// The legacy call goes after any tool call of the delta, as the full
	// decoder reads them, so that both forms in one delta are refused.
	fc := fastCall{id: -1, typ: -1, name: -1, args: -1, legacy: true}
	if !parseFastFunction(tx, legacy, &fc) {
		return fcalls, false
	}
	first := len(fcalls) - len(d.calls)
	fcalls = append(fcalls, fc)
	d.calls = fcalls[first:len(fcalls):len(fcalls)]
	return fcalls, true
}

// applyText applies the deltas of a chunk feedText understood whole.
func (s *stream) applyText(tx *jsonx.Text, deltas []textDelta) {
	for _, d := range deltas {
		c, _ := s.choice(d.choice) // in range: checked by readTextChoice
		if d.content >= 0 {
			c.content = fragment(tx, c.content, tx.Raw(d.content))
			c.hasText = true
		}
		for _, fc := range d.calls {
			call := c.call(fc.index)
			if fc.legacy {
				c.legacy = true
			}
			id, _ := jsonx.Unquote(tx.Raw(fc.id))
			typ, _ := jsonx.Unquote(tx.Raw(fc.typ))
			call.identify(id, typ)
			if fc.name >= 0 {
				n, _ := jsonx.Unquote(tx.Raw(fc.name))
				call.name += n
			}
			call.args = fragment(tx, call.args, tx.Raw(fc.args))
			s.call = true
		}
		if d.finish >= 0 {
			c.finish, _ = jsonx.Unquote(tx.Raw(d.finish))
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
	fc.id, fc.typ, fc.name, fc.args = -1, -1, -1, -1
	if tx.Kind(e) != '{' || tx.Repeats(e) {
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
			fc.id = v
		case "type":
			if string(tx.Raw(v)) != `"function"` {
				return fc, false
			}
			fc.typ = v
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
	if tx.Kind(v) != '{' || tx.Repeats(v) {
		return false
	}
	var buf [32]byte
	for k, j := 0, v+1; k < tx.Len(v); k, j = k+1, tx.Next(j+1) {
		fv := j + 1
		name := tx.Name(j, buf[:0])
		switch {
		case (string(name) == "name" || string(name) == "arguments") && tx.Null(fv):
		case string(name) == "name" && tx.Kind(fv) == '"':
			fc.name = fv
		case string(name) == "arguments" && tx.Kind(fv) == '"':
			fc.args = fv
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
	if dst == nil && len(raw) > 2 {
		// A text or a call's arguments come in many fragments of a few
		// bytes: growing from nothing took a copy every few fragments.
		// An empty one, as a call's first often is, waits for the next.
		dst = make([]byte, 0, max(firstFragmentCap, 2*len(raw)))
	}
	return jsonx.AppendChecked(dst, raw[1:len(raw)-1])
}
