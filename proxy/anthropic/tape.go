package anthropic

import (
	"bytes"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// The members of an event that feedTape reads, by their place in
// topKeys; a bit each in the masks of the members an event type may have.
const (
	kType = iota
	kIndex
	kMessage
	kBlock
	kDelta
	kUsage
	kKeys
)

var topKeys = [kKeys]string{"type", "index", "message", "content_block", "delta", "usage"}

// The places of the members of a content_block_delta's delta in
// deltaKeys, and of a content block's in blockKeys: the type first, then
// the strings, then the one member of any type.
const (
	dText, dThinking, dSignature, dPartial, dCitation = 1, 2, 3, 4, 5
	bID, bName, bText, bThinking, bSignature, bInput  = 1, 2, 3, 4, 5, 6
)

var (
	deltaKeys = [6]string{"type", "text", "thinking", "signature", "partial_json", "citation"}
	blockKeys = [7]string{"type", "id", "name", "text", "thinking", "signature", "input"}
	msgKeys   = []string{"id", "usage"}
	stopKeys  = []string{"stop_reason"}
	countKeys = []string{"input_tokens", "output_tokens"}
)

// feedTape reads the common events from the event's tape: Follow has
// read the event once, grammar and UTF-8, and its keys were checked on the
// tape, so the members are found by walking a few nodes where the decoder
// split each object again. It reports false, having changed nothing, for
// an event it does not fully understand: one that is not UTF-8, or has a
// member of another type, a member given twice, or a member it does not
// read in that event. The decoder, which is the reference, then reads it
// and refuses it where it must.
func (s *stream) feedTape(tx *jsonx.Text, name []byte) (neutral.Step, bool) {
	if tx.NotUTF8 || tx.Kind(0) != '{' {
		return neutral.Step{}, false
	}
	var at [kKeys]int
	if !members(tx, 0, topKeys[:], at[:]) {
		return neutral.Step{}, false
	}
	typ, ok := tapeType(tx, at[kType])
	if !ok {
		return neutral.Step{}, false
	}
	if typ == "" {
		typ = known(name)
	}
	has := 0
	for k, v := range at {
		if v >= 0 && k != kType {
			has |= 1 << k
		}
	}
	switch typ {
	case "content_block_delta":
		ok = has&^(1<<kIndex|1<<kDelta) == 0 && s.tapeDelta(tx, at[kIndex], at[kDelta])
	case "content_block_start":
		ok = has&^(1<<kIndex|1<<kBlock) == 0 && s.tapeStart(tx, at[kIndex], at[kBlock])
	case "content_block_stop":
		ok = has&^(1<<kIndex) == 0 && s.tapeBlock(tx, at[kIndex]) != nil
	case "message_start":
		ok = has&^(1<<kMessage) == 0 && s.tapeMessage(tx, at[kMessage])
	case "message_delta":
		ok = has&^(1<<kDelta|1<<kUsage) == 0 && s.tapeMessageDelta(tx, at[kDelta], at[kUsage])
	case "error":
		s.done = true
		return neutral.Step{UpstreamError: true}, true
	case "message_stop":
		s.done = true
	default:
		// ping, and event types added later, whose type alone is read.
		ok = !readEvent(typ)
	}
	if !ok {
		return neutral.Step{}, false
	}
	return s.stepAfter(typ), true
}

// members is jsonx.Text.Members against eventKeys: false where the
// decoder must read the object, for one of keys given twice (which of the
// repeats counts is the decoder's rule), or a key that folds onto one of
// eventKeys (which the stream's decoder refuses, and which encoding/json
// takes for the key in an answer).
func members(tx *jsonx.Text, obj int, keys []string, vals []int) bool {
	return tx.Members(obj, keys, eventKeys, vals)
}

// tapeType is typeOf for node i: "" when absent or null, false when no
// string.
func tapeType(tx *jsonx.Text, i int) (string, bool) {
	if tx.Null(i) {
		return "", true
	}
	if tx.Kind(i) != '"' {
		return "", false
	}
	var buf [32]byte
	return known(tx.Name(i, buf[:0])), true
}

// known is name as a string, one of knownTypes when it is one.
func known(name []byte) string {
	for _, t := range knownTypes {
		if string(name) == t {
			return t
		}
	}
	return string(name)
}

// tapeIndex reads the index at node i as field does; has is false when it
// is absent or null.
func tapeIndex(tx *jsonx.Text, i int) (idx int, has, ok bool) {
	if tx.Null(i) {
		return 0, false, true
	}
	n, ok := jsonx.Int(tx.Raw(i))
	if !ok || n != int64(int(n)) {
		return 0, false, false
	}
	return int(n), true, true
}

// tapeBlock is the started block the index at node i addresses, or nil.
func (s *stream) tapeBlock(tx *jsonx.Text, i int) *streamBlock {
	idx, has, ok := tapeIndex(tx, i)
	if !ok || !has || idx < 0 || idx >= len(s.blocks) {
		return nil
	}
	return s.blocks[idx]
}

// allStrings reports whether each of the nodes is a string or absent or null.
func allStrings(tx *jsonx.Text, nodes []int) bool {
	for _, i := range nodes {
		if !tx.Null(i) && tx.Kind(i) != '"' {
			return false
		}
	}
	return true
}

// tapeDelta applies a content_block_delta, its index at node index and
// its delta at node d, as apply does.
func (s *stream) tapeDelta(tx *jsonx.Text, index, d int) bool {
	b := s.tapeBlock(tx, index)
	if b == nil || tx.Kind(d) != '{' {
		return false
	}
	var at [len(deltaKeys)]int
	if !members(tx, d, deltaKeys[:], at[:]) || !allStrings(tx, at[dText:dCitation]) {
		return false
	}
	typ, ok := tapeType(tx, at[0])
	if !ok {
		return false
	}
	// AppendStr appends nothing for a member that is null or absent.
	switch typ {
	case "text_delta":
		b.text, _ = tx.AppendStr(b.text, at[dText])
	case "thinking_delta":
		b.thinking, _ = tx.AppendStr(b.thinking, at[dThinking])
	case "signature_delta":
		b.signature, _ = tx.AppendStr(b.signature, at[dSignature])
	case "citations_delta":
		if !tx.Null(at[dCitation]) {
			b.citations = append(b.citations, bytes.Clone(tx.Raw(at[dCitation])))
		}
	case "input_json_delta":
		if b.typ == "text" || b.typ == "thinking" || b.typ == "redacted_thinking" || tx.Null(at[dPartial]) {
			return false
		}
		b.sawInput = true
		b.input, _ = tx.AppendStr(b.input, at[dPartial])
	}
	return true
}

// tapeStart starts the block at node cb, its index at node index, as
// startBlock does.
func (s *stream) tapeStart(tx *jsonx.Text, index, cb int) bool {
	idx, has, ok := tapeIndex(tx, index)
	if !ok || !has || idx != len(s.blocks) || len(s.blocks) >= maxBlocks || tx.Kind(cb) != '{' {
		return false
	}
	var at [len(blockKeys)]int
	if !members(tx, cb, blockKeys[:], at[:]) || !allStrings(tx, at[bID:bInput]) {
		return false
	}
	typ, ok := tapeType(tx, at[0])
	if !ok {
		return false
	}
	start := bytes.Clone(tx.Raw(cb))
	b := &streamBlock{typ: typ, start: start, call: -1}
	b.id, _ = tx.Str(at[bID])
	b.name, _ = tx.Str(at[bName])
	b.text, b.thinking, b.signature = present(tx, at[bText]), present(tx, at[bThinking]), present(tx, at[bSignature])
	if in := at[bInput]; in >= 0 {
		// The input as sent, within start as newBlock leaves it.
		lo := rawStart(tx, in) - rawStart(tx, cb)
		b.startInput = start[lo : lo+len(tx.Raw(in))]
	}
	if b.typ == "tool_use" {
		b.call = s.calls
		s.calls++
	}
	s.blocks = append(s.blocks, b)
	return true
}

// present is a string member's value, empty but not nil when it is null,
// nil when it is absent, as newBlock reads it.
func present(tx *jsonx.Text, i int) []byte {
	if i < 0 {
		return nil
	}
	if v, ok := tx.Bytes(i); ok {
		return v
	}
	return []byte{}
}

// rawStart is where node i's text, a string's with its quote, begins.
func rawStart(tx *jsonx.Text, i int) int {
	n := &tx.Nodes[i]
	if n.Kind == '"' {
		return int(n.Start) - 1
	}
	return int(n.Start)
}

// tapeMessage reads message_start's message at node m, as readMessage and
// apply do.
func (s *stream) tapeMessage(tx *jsonx.Text, m int) bool {
	if tx.Null(m) {
		return true
	}
	var at [2]int
	if tx.Kind(m) != '{' || !members(tx, m, msgKeys, at[:]) || !allStrings(tx, at[:1]) {
		return false
	}
	var t tokens
	if !tx.Null(at[1]) {
		var ok bool
		if t, ok = tapeTokens(tx, at[1]); !ok {
			return false
		}
	}
	s.id, _ = tx.Str(at[0])
	if !tx.Null(at[1]) {
		s.usage = t.usage()
	}
	return true
}

// tapeMessageDelta applies a message_delta, its delta at node d and its
// usage at node u, as apply does.
func (s *stream) tapeMessageDelta(tx *jsonx.Text, d, u int) bool {
	stop := -1
	if !tx.Null(d) {
		var at [1]int
		if tx.Kind(d) != '{' || !members(tx, d, stopKeys, at[:]) || !allStrings(tx, at[:]) {
			return false
		}
		stop = at[0]
	}
	var t tokens
	if !tx.Null(u) {
		var ok bool
		if t, ok = tapeTokens(tx, u); !ok {
			return false
		}
	}
	if !tx.Null(stop) {
		s.stop, _ = tx.Str(stop)
	}
	if t.hasOut {
		s.usage.Output = t.out
	}
	if t.hasIn {
		s.usage.Input = t.in
	}
	return true
}

// tapeTokens reads the usage object at node u; a count that is null is
// not set.
func tapeTokens(tx *jsonx.Text, u int) (tokens, bool) {
	var t tokens
	var at [2]int
	if tx.Kind(u) != '{' || !members(tx, u, countKeys, at[:]) {
		return t, false
	}
	var ok1, ok2 = true, true
	if t.hasIn = !tx.Null(at[0]); t.hasIn {
		t.in, ok1 = jsonx.Int(tx.Raw(at[0]))
	}
	if t.hasOut = !tx.Null(at[1]); t.hasOut {
		t.out, ok2 = jsonx.Int(tx.Raw(at[1]))
	}
	return t, ok1 && ok2
}
