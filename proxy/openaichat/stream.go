package openaichat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/sse"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// Bounds on what a stream may declare, checked before anything grows.
const (
	maxChoices = 128
	maxCalls   = 128
)

var doneData = []byte("[DONE]")

// ErrStream reports a chunk that cannot be read.
var ErrStream = errors.New("openaichat: unreadable stream chunk")

type chunk struct {
	ID      string        `json:"id"`
	Choices []chunkChoice `json:"choices"`
	Usage   *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type chunkChoice struct {
	Index int `json:"index"`
	Delta struct {
		Content          *string     `json:"content"`
		Refusal          *string     `json:"refusal"`
		ReasoningContent *string     `json:"reasoning_content"`
		ToolCalls        []deltaCall `json:"tool_calls"`
	} `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type deltaCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
	Custom *struct {
		Name  *string `json:"name"`
		Input *string `json:"input"`
	} `json:"custom"`
}

// streamCall accumulates one call's deltas.
type streamCall struct {
	id, typ, name string
	args          []byte
	badShape      bool
}

// identify records the call's id and type. Servers that repeat them on
// every fragment send them empty after the first, which must not erase
// them: a call without its id can be neither run nor repaired.
func (c *streamCall) identify(id, typ string) {
	if id != "" {
		c.id = id
	}
	if typ != "" {
		c.typ = typ
	}
}

type streamChoice struct {
	content   []byte
	reasoning []byte
	refusal   []byte
	hasText   bool
	calls     []*streamCall
	finish    string
}

// stream follows one Chat Completions stream.
type stream struct {
	scratch scratch
	id      string
	choices map[int]*streamChoice
	usage   recovery.Usage
	holding bool
}

// NewStream implements api.Adapter.
func (Adapter) NewStream(*api.Request) api.Stream {
	return &stream{choices: map[int]*streamChoice{}}
}

func (s *stream) choice(i int) (*streamChoice, error) {
	if i < 0 || i >= maxChoices {
		return nil, fmt.Errorf("%w: choice index %d", ErrStream, i)
	}
	c := s.choices[i]
	if c == nil {
		c = &streamChoice{}
		s.choices[i] = c
	}
	return c, nil
}

// Feed implements api.Stream.
func (s *stream) Feed(ev *sse.Event) (api.Step, error) {
	if ev.Comment || len(ev.Data) == 0 {
		return api.Step{}, nil
	}
	if bytes.Equal(ev.Data, doneData) {
		return api.Step{Done: true}, nil
	}
	if ok, opening, err := s.feedText(ev.Data); ok || err != nil {
		return api.Step{Hold: s.holding, Opening: opening && !s.holding}, err
	}
	var ch chunk
	if err := json.Unmarshal(ev.Data, &ch); err != nil {
		return api.Step{}, fmt.Errorf("%w: %v", ErrStream, err)
	}
	if len(ch.Error) > 0 && !jsonx.IsNull(ch.Error) {
		return api.Step{}, fmt.Errorf("%w: the upstream sent an error event", ErrStream)
	}
	if s.id == "" {
		s.id = ch.ID
	}
	if ch.Usage != nil {
		s.usage = recovery.Usage{Input: ch.Usage.PromptTokens, Output: ch.Usage.CompletionTokens}
	}
	step := api.Step{}
	for i := range ch.Choices {
		cc := &ch.Choices[i]
		c, err := s.choice(cc.Index)
		if err != nil {
			return step, err
		}
		if cc.Delta.Content != nil {
			c.content = append(c.content, *cc.Delta.Content...)
			c.hasText = true
		}
		if cc.Delta.ReasoningContent != nil {
			c.reasoning = append(c.reasoning, *cc.Delta.ReasoningContent...)
		}
		if cc.Delta.Refusal != nil {
			c.refusal = append(c.refusal, *cc.Delta.Refusal...)
		}
		for _, dc := range cc.Delta.ToolCalls {
			if dc.Index < 0 || dc.Index >= maxCalls {
				return step, fmt.Errorf("%w: tool call index %d", ErrStream, dc.Index)
			}
			for len(c.calls) <= dc.Index {
				c.calls = append(c.calls, &streamCall{})
			}
			sc := c.calls[dc.Index]
			sc.identify(dc.ID, dc.Type)
			switch {
			case dc.Function != nil:
				if dc.Function.Name != nil {
					sc.name += *dc.Function.Name
				}
				if a := dc.Function.Arguments; len(a) > 0 && !jsonx.IsNull(a) {
					if s, ok := unquoteFragment(a); ok {
						sc.args = append(sc.args, s...)
					} else {
						sc.badShape = true
					}
				}
			case dc.Custom != nil:
				if dc.Custom.Name != nil {
					sc.name += *dc.Custom.Name
				}
				if dc.Custom.Input != nil {
					sc.args = append(sc.args, *dc.Custom.Input...)
				}
			}
			s.holding = true
		}
		if cc.FinishReason != nil {
			c.finish = *cc.FinishReason
		}
	}
	step.Hold = s.holding
	return step, nil
}

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
	opening = jsonx.IsNull(obj.Get("usage"))
	choices := sc.choices[:0]
	if raw := obj.Get("choices"); !jsonx.IsNull(raw) {
		if choices, err = jsonx.SplitArrayInto(sc.choices, raw); err != nil {
			return false, false, nil
		}
		sc.choices = choices
	}
	deltas := sc.deltas[:0]
	fcalls := sc.fcalls[:0]
	for _, raw := range choices {
		co, err := jsonx.SplitObjectInto(sc.choice, raw)
		if err != nil || misspelt(co, "index", "delta", "finish_reason") {
			return false, false, nil
		}
		sc.choice = co
		idx, err := strconv.Atoi(string(co.Get("index")))
		if err != nil {
			return false, false, nil
		}
		if idx < 0 || idx >= maxChoices {
			return false, false, fmt.Errorf("%w: choice index %d", ErrStream, idx)
		}
		d := textDelta{choice: idx}
		opening = opening && jsonx.IsNull(co.Get("logprobs"))
		if fr := co.Get("finish_reason"); !jsonx.IsNull(fr) {
			if fr[0] != '"' {
				return false, false, nil
			}
			d.finish = fr
		}
		if dr := co.Get("delta"); !jsonx.IsNull(dr) {
			delta, err := jsonx.SplitObjectInto(sc.delta, dr)
			if err != nil {
				return false, false, nil
			}
			sc.delta = delta
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
						return false, false, nil
					}
					d.calls = fcalls[first:len(fcalls):len(fcalls)]
				default:
					return false, false, nil
				}
			}
		}
		opening = opening && d.finish == nil && len(d.calls) == 0 && (d.content == nil || string(d.content) == `""`)
		deltas = append(deltas, d)
	}
	sc.deltas, sc.fcalls = deltas, fcalls
	for _, d := range deltas {
		for _, fc := range d.calls {
			if fc.index < 0 || fc.index >= maxCalls {
				return false, false, fmt.Errorf("%w: tool call index %d", ErrStream, fc.index)
			}
		}
	}
	// The chunk is understood: apply it.
	for _, d := range deltas {
		c, _ := s.choice(d.choice) // in range: checked above
		if d.content != nil {
			c.content = appendFragment(c.content, d.content)
			c.hasText = true
		}
		for _, fc := range d.calls {
			for len(c.calls) <= fc.index {
				c.calls = append(c.calls, &streamCall{})
			}
			call := c.calls[fc.index]
			id, _ := jsonx.Unquote(fc.id)
			typ, _ := jsonx.Unquote(fc.typ)
			call.identify(id, typ)
			if fc.name != nil {
				n, _ := jsonx.Unquote(fc.name)
				call.name += n
			}
			call.args = appendFragment(call.args, fc.args)
			s.holding = true
		}
		if d.finish != nil {
			c.finish, _ = jsonx.Unquote(d.finish)
		}
	}
	if s.id == "" {
		s.id, _ = jsonx.Unquote(obj.Get("id"))
	}
	if u := obj.Get("usage"); !jsonx.IsNull(u) {
		if usage, ok := readUsage(u); ok {
			s.usage = usage
		}
	}
	return true, opening, nil
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
		obj, err := jsonx.SplitObjectInto(sc.call, e)
		if err != nil {
			return dst, false
		}
		sc.call = obj
		var fc fastCall
		seenIndex := false
		for _, f := range obj {
			switch f.Key {
			case "index":
				if fc.index, err = strconv.Atoi(string(f.Value)); err != nil {
					return dst, false
				}
				seenIndex = true
			case "id":
				if f.Value[0] != '"' {
					return dst, false
				}
				fc.id = f.Value
			case "type":
				if string(f.Value) != `"function"` {
					return dst, false
				}
				fc.typ = f.Value
			case "function":
				if !s.parseFastFunction(f.Value, &fc) {
					return dst, false
				}
			default:
				return dst, false
			}
		}
		if !seenIndex {
			return dst, false
		}
		dst = append(dst, fc)
	}
	return dst, true
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

// unquoteFragment reads one arguments fragment, a JSON string. Only its
// escapes are decoded; every other byte is kept as sent, because a server
// may cut the arguments inside a multi-byte character and the halves are
// valid only once the fragments are joined. Decoding a fragment whole (as
// encoding/json does) would silently turn each half into U+FFFD.
func unquoteFragment(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	out, ok := jsonx.AppendEscapesDecoded(nil, raw[1:len(raw)-1])
	return string(out), ok
}

// appendFragment appends a JSON string fragment the grammar check already
// accepted, decoded as unquoteFragment does; nil appends nothing.
func appendFragment(dst, raw []byte) []byte {
	if len(raw) < 2 {
		return dst
	}
	out, _ := jsonx.AppendEscapesDecoded(dst, raw[1:len(raw)-1])
	return out
}

// Usage implements api.Stream.
func (s *stream) Usage() recovery.Usage { return s.usage }

// Committed implements api.Stream: chat completions are never stored.
func (s *stream) Committed() bool { return false }

func (s *stream) order() []int {
	idx := make([]int, 0, len(s.choices))
	for i := range s.choices {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	return idx
}

// Turns implements api.Stream. Choices are returned by index; a missing
// index in between gets an empty turn so positions stay aligned.
func (s *stream) Turns() []*recovery.Turn {
	idx := s.order()
	if len(idx) == 0 {
		return nil
	}
	out := make([]*recovery.Turn, idx[len(idx)-1]+1)
	for i := range out {
		out[i] = &recovery.Turn{ResponseID: s.id, Raw: rawMessage([]byte(`{"role":"assistant","content":""}`))}
	}
	for _, i := range idx {
		c := s.choices[i]
		t := out[i]
		t.Text = string(c.content)
		for _, sc := range c.calls {
			call := validate.ToolCall{ID: sc.id, Name: sc.name, Args: sc.args, Kind: validate.Function, BadShape: sc.badShape}
			switch sc.typ {
			case "", "function":
			case "custom":
				call.Kind = validate.Custom
			default:
				call.Kind = validate.Other
			}
			t.Calls = append(t.Calls, call)
		}
		t.Truncated = c.finish == "length" && len(c.calls) > 0
		// The message is rebuilt only if a re-query needs it.
		t.Raw = c
	}
	if len(out) > 0 {
		out[0].Usage = s.usage
	}
	return out
}

// message rebuilds the assistant message the stream carried, so a re-query
// replays exactly what the model said.
func (c *streamChoice) message() []byte {
	m := jsonx.Object{{Key: "role", Value: []byte(`"assistant"`)}}
	if c.hasText {
		m = m.Set("content", jsonx.String(string(c.content)))
	} else {
		m = m.Set("content", []byte("null"))
	}
	if len(c.reasoning) > 0 {
		m = m.Set("reasoning_content", jsonx.String(string(c.reasoning)))
	}
	if len(c.refusal) > 0 {
		m = m.Set("refusal", jsonx.String(string(c.refusal)))
	}
	if len(c.calls) > 0 {
		calls := make([][]byte, len(c.calls))
		for i, sc := range c.calls {
			typ := sc.typ
			if typ == "" {
				typ = "function"
			}
			var body []byte
			if typ == "custom" {
				body = jsonx.Object{{Key: "name", Value: jsonx.String(sc.name)}, {Key: "input", Value: jsonx.String(string(sc.args))}}.Bytes()
			} else {
				body = jsonx.Object{{Key: "name", Value: jsonx.String(sc.name)}, {Key: "arguments", Value: jsonx.String(string(sc.args))}}.Bytes()
			}
			calls[i] = jsonx.Object{
				{Key: "id", Value: jsonx.String(sc.id)},
				{Key: "type", Value: jsonx.String(typ)},
				{Key: typ, Value: body},
			}.Bytes()
		}
		m = m.Set("tool_calls", jsonx.AppendArray(nil, calls))
	}
	return m.Bytes()
}

// ErrorEvent implements api.Stream. The openai SDKs raise an APIError for a
// data event carrying an "error" object; [DONE] closes the stream cleanly.
func (s *stream) ErrorEvent(code, message string, esc *api.Escalated) []byte {
	var body []byte
	if esc != nil {
		body = ErrorEnvelope(esc)
	} else {
		body = jsonx.Object{{Key: "error", Value: jsonx.Object{
			{Key: "type", Value: jsonx.String(code)},
			{Key: "code", Value: jsonx.String(code)},
			{Key: "message", Value: jsonx.String(message)},
			{Key: "param", Value: []byte("null")},
		}.Bytes()}}.Bytes()
	}
	out := sse.AppendEvent(nil, "", body)
	return sse.AppendEvent(out, "", doneData)
}

// Render implements api.Stream. Held chunks that carry nothing that changed
// go out as the upstream sent them; the others are rewritten: a replaced
// call is sent whole in its first chunk (same index and id) and its other
// fragments are dropped; an escalated or abstained choice becomes text.
func (s *stream) Render(held []api.HeldEvent, finals []api.Final) ([]byte, error) {
	var out []byte
	sentCall := map[[2]int]bool{}
	sentText := map[int]bool{}
	for _, ev := range held {
		if len(ev.Data) == 0 || bytes.Equal(ev.Data, doneData) || !touches(ev.Data, finals) {
			out = append(out, ev.Raw...)
			continue
		}
		obj, err := jsonx.ParseObject(ev.Data)
		if err != nil {
			return nil, err
		}
		choices, err := jsonx.ParseArray(obj.Get("choices"))
		if err != nil {
			return nil, err
		}
		choices = append([][]byte(nil), choices...)
		var escBody []byte
		for k, raw := range choices {
			c, err := jsonx.ParseObject(raw)
			if err != nil {
				return nil, err
			}
			var idx int
			if err := json.Unmarshal(c.Get("index"), &idx); err != nil || idx < 0 || idx >= len(finals) {
				continue
			}
			f := finals[idx]
			text := ""
			switch {
			case f.Escalated != nil:
				text = f.Escalated.Text
				escBody = f.Escalated.Body
			case f.Result != nil && f.Result.Outcome == recovery.Abstained:
				text = f.Result.AbstainReason
			}
			if f.Escalated != nil || (f.Result != nil && f.Result.Outcome == recovery.Abstained) {
				delta := jsonx.Object{}
				// The role opens the message; only what the model said
				// after it is replaced.
				if old, err := jsonx.ParseObject(c.Get("delta")); err == nil && old.Has("role") {
					delta = delta.Set("role", old.Get("role"))
				}
				if !sentText[idx] {
					sentText[idx] = true
					delta = delta.Set("content", jsonx.String(text))
				}
				c = c.Set("delta", delta.Bytes())
				if !jsonx.IsNull(c.Get("finish_reason")) {
					c = c.Set("finish_reason", []byte(`"stop"`))
				}
				choices[k] = c.Bytes()
				continue
			}
			if f.Result == nil {
				continue
			}
			delta, err := jsonx.ParseObject(c.Get("delta"))
			if err != nil || delta.Get("tool_calls") == nil {
				continue
			}
			calls, err := jsonx.ParseArray(delta.Get("tool_calls"))
			if err != nil {
				return nil, err
			}
			var kept [][]byte
			for _, rc := range calls {
				var dc deltaCall
				if err := json.Unmarshal(rc, &dc); err != nil {
					return nil, err
				}
				if dc.Index >= len(f.Result.Changed) || !f.Result.Changed[dc.Index] {
					kept = append(kept, rc)
					continue
				}
				key := [2]int{idx, dc.Index}
				if sentCall[key] {
					continue
				}
				sentCall[key] = true
				nc := f.Result.Calls[dc.Index]
				kept = append(kept, jsonx.Object{
					{Key: "index", Value: []byte(fmt.Sprint(dc.Index))},
					{Key: "id", Value: jsonx.String(nc.ID)},
					{Key: "type", Value: []byte(`"function"`)},
					{Key: "function", Value: jsonx.Object{
						{Key: "name", Value: jsonx.String(nc.Name)},
						{Key: "arguments", Value: jsonx.String(string(nc.Args))},
					}.Bytes()},
				}.Bytes())
			}
			if len(kept) == 0 {
				delta = delta.Delete("tool_calls")
			} else {
				delta = delta.Set("tool_calls", jsonx.AppendArray(nil, kept))
			}
			c = c.Set("delta", delta.Bytes())
			choices[k] = c.Bytes()
		}
		if emptied(choices) && jsonx.IsNull(obj.Get("usage")) {
			// Only fragments of a replaced call were here; the whole call
			// went out with its first chunk.
			continue
		}
		obj = obj.Set("choices", jsonx.AppendArray(nil, choices))
		if escBody != nil {
			obj = obj.Set("toolgate_escalation", escBody)
		}
		out = sse.AppendEvent(out, ev.Event, obj.Bytes())
	}
	return out, nil
}

// touches reports whether a chunk may carry something Render must change:
// it belongs to a choice that was not passed through unchanged.
func touches(data []byte, finals []api.Final) bool {
	for _, f := range finals {
		if f.Escalated != nil || (f.Result != nil && (f.Result.Outcome == recovery.Abstained || f.Result.AnyChanged())) {
			return bytes.Contains(data, []byte(`"choices"`))
		}
	}
	return false
}

// emptied reports whether every choice of a rewritten chunk is left with an
// empty delta and no finish reason.
func emptied(choices [][]byte) bool {
	for _, raw := range choices {
		var c struct {
			Delta        map[string]json.RawMessage `json:"delta"`
			FinishReason json.RawMessage            `json:"finish_reason"`
			Logprobs     json.RawMessage            `json:"logprobs"`
		}
		if json.Unmarshal(raw, &c) != nil || len(c.Delta) > 0 || !jsonx.IsNull(c.FinishReason) || !jsonx.IsNull(c.Logprobs) {
			return false
		}
	}
	return len(choices) > 0
}

// rawMessage is an assistant message rebuilt from a stream.
type rawMessage []byte
