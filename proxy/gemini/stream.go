package gemini

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
)

// maxCandidates bounds the candidate index a stream may use (the API
// allows candidateCount up to 8).
const maxCandidates = 8

// maxElement bounds one element of a JSON-array stream.
const maxElement = 8 << 20

// ErrStream reports a stream chunk that cannot be read.
var ErrStream = errors.New("gemini: unreadable stream chunk")

func errStream(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrStream, fmt.Sprintf(format, args...))
}

// candidate accumulates one candidate across chunks.
type candidate struct {
	parts  [][]byte
	role   []byte
	finish string
	// calls counts the calls begun, a streamed one from its first
	// fragment.
	calls int
	// asm follows calls whose arguments are streamed.
	asm assembler
	// firstCall is the chunk in which its first call arrived, or -1.
	firstCall int
}

// chunkCand is where one candidate appears in one chunk.
type chunkCand struct {
	index       int
	callsBefore int
	// open: the chunk's first call part continues a streamed call.
	open bool
}

// stream follows one streamed answer, SSE or JSON array. Gemini sends each
// functionCall whole in one chunk, except Vertex AI's streamed arguments,
// whose fragments are assembled (partial.go); a call is checked once
// whole, and from the chunk that carries the first call part on,
// everything is held.
type stream struct {
	arr    *ArrayReader
	vertex bool
	cands  []*candidate
	chunks [][]chunkCand
	// chunkAt is, for each chunk, the number of events fed before it: what
	// places a chunk against the events the pipeline says went out.
	chunkAt []int
	// fed counts the events fed.
	fed   int
	usage neutral.Usage
	id    string
	// call: the chunk being read carries a call part.
	call     bool
	feedback bool
	// content: a chunk carried something for the client (a part other than
	// empty text, a finish reason, prompt feedback); before that, chunks
	// only open the answer.
	content bool
	// blank is an empty event in the line breaks the upstream uses.
	blank []byte
}

var _ api.Stream = (*stream)(nil)

// NewStream implements api.Codec: an SSE stream (alt=sse).
func (c *codec) NewStream() api.Stream {
	return &stream{vertex: c.vertex()}
}

// NewFramedStream implements api.Codec: an answer to :streamGenerateContent
// (the verb of the path DecodeRequest read) that is not SSE is the
// JSON-array stream.
func (c *codec) NewFramedStream(h http.Header, body io.Reader) (api.Stream, api.EventReader, bool) {
	if !strings.HasSuffix(c.path, verbStream) || strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		return nil, nil, false
	}
	rd := NewArrayReader(body, maxElement)
	return &stream{arr: rd, vertex: c.vertex()}, rd, true
}

// Feed implements api.Stream.
func (s *stream) Feed(ev *sse.Event) (neutral.Step, error) {
	s.fed++
	if s.blank == nil && s.arr == nil {
		s.blank = blankEvent(ev.Raw)
	}
	if s.arr == nil && len(ev.Data) == 0 && !ev.Comment && unframedError(ev.Raw) {
		return neutral.Step{UpstreamError: true}, nil
	}
	if ev.Comment || len(ev.Data) == 0 {
		return neutral.Step{}, nil
	}
	if foldedKey(ev.Data) {
		return neutral.Step{}, errFolded
	}
	obj, err := jsonx.ParseObject(ev.Data)
	if err != nil {
		return neutral.Step{}, errStream("a chunk is not a JSON object")
	}
	if obj.Has("error") {
		// Google's error envelope, which the SDKs raise with its code,
		// status and message. One that also carries an answer says two
		// things at once, and its parts would reach the client unjudged.
		if obj.Has("candidates") {
			return neutral.Step{}, errStream("an error chunk that also carries candidates")
		}
		return neutral.Step{UpstreamError: true}, nil
	}
	s.call = false
	if err := s.chunk(obj); err != nil {
		return neutral.Step{}, err
	}
	return neutral.Step{Hold: s.call, Opening: !s.content}, nil
}

// unframedError reports an SSE event that is no SSE at all but Google's
// error envelope written as it is, or as a one-element array: the API
// writes a server error into an alt=sse stream so, without data: framing
// (the GenAI SDKs read such a line as the error it is).
func unframedError(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		elems, err := jsonx.ParseArray(raw)
		if err != nil || len(elems) != 1 {
			return false
		}
		raw = elems[0]
	}
	obj, err := jsonx.ParseObject(raw)
	return err == nil && obj.Has("error") && !obj.Has("candidates") && !foldedKey(raw)
}

// chunk reads one GenerateContentResponse.
func (s *stream) chunk(obj jsonx.Object) error {
	n := len(s.chunks)
	s.chunks = append(s.chunks, nil)
	s.chunkAt = append(s.chunkAt, s.fed-1)
	if u := get(obj, "usageMetadata"); u != nil {
		usage, err := usageOf(u)
		if err != nil {
			return errStream("usageMetadata: %v", err)
		}
		// Each chunk's usage is the total so far.
		s.usage = usage
	}
	if id, ok := jsonx.Unquote(get(obj, "responseId")); ok {
		s.id = id
	}
	if has(obj, "promptFeedback") {
		s.feedback, s.content = true, true
	}
	cands, err := array(obj.Get("candidates"))
	if err != nil {
		return errStream("candidates is not an array")
	}
	for k, raw := range cands {
		c, err := jsonx.ParseObject(raw)
		if err != nil {
			return errStream("a candidate is not an object")
		}
		idx := k
		if v := c.Get("index"); v != nil {
			i, ok := jsonx.Int(v)
			if !ok || i < 0 || i >= maxCandidates {
				return errStream("candidate index out of range")
			}
			idx = int(i)
		}
		for len(s.cands) <= idx {
			s.cands = append(s.cands, &candidate{firstCall: -1})
		}
		if err := s.candidate(s.cands[idx], idx, n, c); err != nil {
			return err
		}
	}
	return nil
}

// candidate adds one chunk's candidate to what was read of it.
func (s *stream) candidate(cs *candidate, idx, n int, c jsonx.Object) error {
	s.chunks[n] = append(s.chunks[n], chunkCand{index: idx, callsBefore: cs.calls, open: cs.asm.open != nil})
	if f := get(c, "finishReason"); !jsonx.IsNull(f) {
		cs.finish = finishName(f, s.vertex)
		s.content = true
	}
	content := c.Get("content")
	if jsonx.IsNull(content) {
		return nil
	}
	co, err := jsonx.ParseObject(content)
	if err != nil {
		return errStream("content is not an object")
	}
	if r := co.Get("role"); r != nil {
		cs.role = bytes.Clone(r)
	}
	parts, err := array(co.Get("parts"))
	if err != nil {
		return errStream("parts is not an array")
	}
	for _, raw := range parts {
		p, err := jsonx.ParseObject(raw)
		if err != nil {
			return errStream("a part is not an object")
		}
		if t, ok := jsonx.Unquote(p.Get("text")); !ok || t != "" || len(p) > 1 {
			s.content = true
		}
		// The event's bytes are the reader's, and the next event is read
		// into them: a streamed call open across events keeps this copy,
		// never the event, however the upstream cut its bytes.
		own := bytes.Clone(raw)
		if has(p, "functionCall") {
			s.call = true
			if err := s.callPart(cs, n, own); err != nil {
				return err
			}
		}
		cs.parts = append(cs.parts, own)
	}
	return nil
}

// callPart reads one functionCall part of candidate cs in chunk n: a
// whole call, or a fragment of one whose arguments are streamed. A call
// is checked once whole.
func (s *stream) callPart(cs *candidate, n int, raw []byte) error {
	begins := cs.asm.open == nil
	whole, err := cs.asm.add(raw)
	if err != nil {
		return err
	}
	if whole != nil {
		p, _ := jsonx.ParseObject(whole)
		if _, err := callOf(get(p, "functionCall"), cs.calls); err != nil {
			return err
		}
	}
	if !begins {
		return nil
	}
	if cs.firstCall < 0 {
		cs.firstCall = n
	}
	cs.calls++
	return nil
}

// Complete implements api.Stream: neither framing has a terminal event
// the body may not go on after, so a stream is complete when its body ends
// cleanly: a JSON array after its closing bracket, an SSE stream once every
// candidate has a finish reason (or the prompt was refused with no
// candidate at all).
func (s *stream) Complete() bool {
	if s.arr != nil {
		return s.arr.Closed()
	}
	if len(s.chunks) == 0 {
		return false
	}
	if len(s.cands) == 0 {
		return s.feedback
	}
	for _, c := range s.cands {
		if c.finish == "" || c.asm.open != nil {
			return false
		}
	}
	return true
}

// Keepalive implements api.Stream: an empty event, which the Go SDK
// skips (it fails on an SSE comment), in the line breaks of the upstream's
// own events (the SDK splits at the first blank line of either kind, so a
// mix would cut an event); between the elements of a JSON array it is
// whitespace.
func (s *stream) Keepalive() []byte {
	if s.blank == nil {
		return []byte("\n\n")
	}
	return s.blank
}

// appendEvent writes an SSE event in the upstream's line breaks: the Go
// SDK splits events at the first blank line of either kind in what it has
// read, so an LF event after CRLF ones (or the reverse) would reach it cut
// or joined to the one before.
func (s *stream) appendEvent(dst []byte, event string, data []byte) []byte {
	blank := s.Keepalive()
	eol := blank[:len(blank)/2]
	if event != "" && !strings.ContainsAny(event, "\r\n") {
		dst = append(append(append(dst, "event: "...), event...), eol...)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		dst = append(append(append(dst, "data: "...), bytes.TrimSuffix(line, []byte("\r"))...), eol...)
	}
	return append(dst, eol...)
}

// blankEvent is an empty SSE event ending the way raw does.
func blankEvent(raw []byte) []byte {
	switch {
	case bytes.HasSuffix(raw, []byte("\r\n")):
		return []byte("\r\n\r\n")
	case bytes.HasSuffix(raw, []byte("\r")):
		return []byte("\r\r")
	}
	return []byte("\n\n")
}

// Usage implements api.Stream.
func (s *stream) Usage() neutral.Usage { return s.usage }

// Turns implements api.Stream: one turn per candidate, its content every
// part the stream carried, each byte for byte, in order.
func (s *stream) Turns() []*neutral.Turn {
	out := make([]*neutral.Turn, 0, len(s.cands))
	for _, c := range s.cands {
		role := c.role
		if role == nil {
			role = []byte(`"model"`)
		}
		// Feed read every part already: only a call left open when the
		// stream ended can fail here, and such a stream is not complete.
		parts, err := assemble(c.parts)
		if err != nil {
			parts = c.parts
		}
		content := jsonx.Object{{Key: "parts", Value: jsonx.AppendArray(nil, parts)}, {Key: "role", Value: role}}.Bytes()
		t := &neutral.Turn{ResponseID: s.id, Usage: s.usage, Raw: &turn{content: content, finish: c.finish}}
		var text []byte
		_ = callsOf(parts, 0, t, &text)
		t.Text = string(text)
		t.Stop = stopOf(c.finish)
		out = append(out, t)
	}
	return out
}

// ErrorEvent implements api.Stream: a chunk that is Google's error
// envelope, which both SDKs raise as an API error. The answer has begun,
// so f.Status is not what the envelope's code says: that is 504 for a
// silent upstream and 502 for anything else that ended the stream. In a
// JSON array the chunk is the last element, and the array is closed after
// it; it opens the array when no event went out (the first carries the
// bracket).
func (s *stream) ErrorEvent(f neutral.Failure, esc *neutral.Escalated, sent api.Sent) []byte {
	var body, say []byte
	if esc != nil {
		body, say = escalationBody(esc), escalationText(esc)
	} else {
		status := 502
		if f.Code == neutral.CodeUpstreamTimeout {
			status = 504
		}
		body = failureBody(status, rpcStatus(status), string(f.Code), f.Message)
	}
	if s.arr == nil {
		var out []byte
		if say != nil {
			out = s.appendEvent(out, "", say)
		}
		return s.appendEvent(out, "", body)
	}
	out := []byte("[")
	if sent.Events > 0 {
		out[0] = ','
	}
	if say != nil {
		out = append(append(out, say...), ',')
	}
	return append(append(out, body...), ']')
}

// escalationText is a chunk that says an escalation as the model's text,
// sent in front of its error element: @google/generative-ai (under
// LangChain's Gemini model) takes an error element for an answer with no
// candidates and drops it, so its app would end on the text that came
// before, with no error. The text names the escalation; clients that
// raise the error element raise it as before.
func escalationText(e *neutral.Escalated) []byte {
	part := jsonx.Object{{Key: "text", Value: jsonx.String("\n\n" + e.Text)}}.Bytes()
	content := jsonx.Object{{Key: "role", Value: []byte(`"model"`)}, {Key: "parts", Value: jsonx.AppendArray(nil, [][]byte{part})}}.Bytes()
	cand := jsonx.Object{{Key: "content", Value: content}, {Key: "index", Value: []byte("0")}}.Bytes()
	return jsonx.Object{
		{Key: "candidates", Value: jsonx.AppendArray(nil, [][]byte{cand})},
		{Key: "toolgate_escalation", Value: e.Body},
	}.Bytes()
}

// UpstreamError implements api.Stream: the upstream's error chunk as it
// came. In a JSON array whose held elements were dropped before the
// opening bracket went out, the element's separator becomes that bracket;
// the array's own closing bracket follows as the upstream sends it.
func (s *stream) UpstreamError(ev neutral.HeldEvent, sent api.Sent) []byte {
	out := append([]byte(nil), ev.Raw...)
	if s.arr == nil || sent.Held == 0 || sent.Events > 0 {
		return out
	}
	if at := bytes.IndexByte(out, ','); at >= 0 && at < len(out)-len(ev.Data) {
		out[at] = '['
	}
	return out
}
