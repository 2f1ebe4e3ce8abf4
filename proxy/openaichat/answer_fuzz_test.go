package openaichat_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaichat"
)

// refAnswer reads a chat completion with encoding/json, member by member
// with exact names (the last of repeated ones), as DecodeAnswer means to:
// what it returns is the reference the one-pass reader is held to.
func refAnswer(body []byte) (*neutral.Answer, error) {
	switch {
	case !utf8.Valid(body):
		return nil, api.ErrNotUTF8
	case api.ProtocolKeys.In(body):
		return nil, api.ErrFoldedKey
	}
	top, ok := refObject(body)
	if !ok {
		return nil, errors.New("not an object")
	}
	var choices []json.RawMessage
	if isNull(top["choices"]) || json.Unmarshal(top["choices"], &choices) != nil {
		return nil, openaichat.ErrShape
	}
	var id string
	_ = json.Unmarshal(top["id"], &id)
	a := &neutral.Answer{Body: body}
	if u := top["usage"]; !isNull(u) {
		uo, ok := refObject(u)
		var in, out int64
		if !ok || refInt(uo["prompt_tokens"], &in) != nil || refInt(uo["completion_tokens"], &out) != nil {
			return nil, openaichat.ErrShape
		}
		a.Usage = neutral.Usage{Input: in, Output: out}
	}
	for i, raw := range choices {
		t, err := refChoice(raw)
		if err != nil {
			return nil, err
		}
		t.ResponseID = id
		if i == 0 {
			t.Usage = a.Usage
		}
		a.Choices = append(a.Choices, t)
	}
	return a, nil
}

func refChoice(raw []byte) (*neutral.Turn, error) {
	c, ok := refObject(raw)
	if !ok {
		return nil, openaichat.ErrShape
	}
	t := &neutral.Turn{}
	if m := c["message"]; !isNull(m) {
		msg, ok := refObject(m)
		if !ok {
			return nil, openaichat.ErrShape
		}
		_ = json.Unmarshal(msg["content"], &t.Text)
		if tcs := msg["tool_calls"]; !isNull(tcs) {
			var elems []json.RawMessage
			if json.Unmarshal(tcs, &elems) != nil {
				return nil, openaichat.ErrShape
			}
			for _, e := range elems {
				call, err := refCall(e)
				if err != nil {
					return nil, err
				}
				t.Calls = append(t.Calls, call)
			}
		}
		if fc := msg["function_call"]; !isNull(fc) {
			// The legacy form's one call, under its synthetic id; beside
			// tool calls it is refused.
			if len(t.Calls) > 0 {
				return nil, api.ErrTwoForms
			}
			call, err := refCall([]byte(`{"id":"function_call","type":"function","function":` + string(fc) + `}`))
			if err != nil {
				return nil, err
			}
			t.Calls = append(t.Calls, call)
		}
	}
	var finish string
	if fr := c["finish_reason"]; !isNull(fr) && json.Unmarshal(fr, &finish) != nil {
		return nil, openaichat.ErrShape
	}
	t.Stop = map[string]neutral.Stop{"": neutral.StopUnknown, "stop": neutral.StopEnd, "length": neutral.StopMaxTokens,
		"tool_calls": neutral.StopToolCalls, "function_call": neutral.StopToolCalls}[finish]
	if _, named := map[string]bool{"": true, "stop": true, "length": true, "tool_calls": true, "function_call": true}[finish]; !named {
		t.Stop = neutral.StopOther
	}
	return t, nil
}

// refCall reads one call as the codec's wire shape says.
func refCall(raw []byte) (neutral.ToolCall, error) {
	c := neutral.ToolCall{Kind: neutral.Function, BadShape: true}
	if isNull(raw) {
		return c, nil
	}
	obj, ok := refObject(raw)
	if !ok {
		return c, openaichat.ErrShape
	}
	var typ string
	fn, fok := refObject(obj["function"])
	cu, cok := refObject(obj["custom"])
	if refString(obj["id"], &c.ID) != nil || refString(obj["type"], &typ) != nil ||
		!isNull(obj["function"]) && !fok || !isNull(obj["custom"]) && !cok {
		return c, openaichat.ErrShape
	}
	var fname, cname string
	if refString(fn["name"], &fname) != nil || refString(cu["name"], &cname) != nil {
		return c, openaichat.ErrShape
	}
	switch {
	case typ == "custom" && cok:
		c.Kind, c.Name, c.BadShape = neutral.Custom, cname, false
	case (typ == "function" || typ == "") && fok:
		c.Name = fname
		var args string
		if json.Unmarshal(fn["arguments"], &args) == nil && len(fn["arguments"]) > 0 && fn["arguments"][0] == '"' {
			c.Args, c.BadShape = []byte(args), false
		} else {
			c.Args = fn["arguments"]
		}
	case fok:
		c.Name = fname
	case cok:
		c.Name = cname
	}
	return c, nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// refObject is an object's members by exact name; false for any other
// value.
func refObject(raw []byte) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// refString reads an optional string: absent or null is "".
func refString(raw []byte, s *string) error {
	if isNull(raw) {
		return nil
	}
	if raw[0] != '"' {
		return errors.New("not a string")
	}
	return json.Unmarshal(raw, s)
}

func refInt(raw []byte, n *int64) error {
	if isNull(raw) {
		return nil
	}
	return json.Unmarshal(raw, n)
}

// FuzzDecodeAnswer holds DecodeAnswer, which reads an answer in one pass
// over a tape, to the same reading made with encoding/json: the same
// refusal (not UTF-8, a folded key, not a chat completion), or the same
// turns, calls, arguments and usage.
func FuzzDecodeAnswer(f *testing.F) {
	for _, p := range []string{"testdata/parallel_tool_calls.json", "testdata/tool_call.json", "../../test/load/testdata/bench/answer.json"} {
		data, err := os.ReadFile(filepath.FromSlash(p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`{"choices":[null,{"message":null,"finish_reason":"length"}],"usage":{"prompt_tokens":1.0}}`,
		`{"choices":[{"message":{"tool_calls":[null,{"type":"custom","custom":{"name":"x"}},{"function":{"arguments":{}}}]}}]}`,
		`{"choices":[{"message":{"content":"\ud83d\ude00","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"a\":\"\\u00e9\"}"}}]}}],"id":"x","id":"y"}`,
		`{"choices":[{"message":{"Content":"x"}}]}`, "{\"choices\":[],\"x\":\"\xff\"}", `{"choic\u0065s":[{}]}`,
		`{"choices":[{"message":{"function_call":{"name":"f","arguments":"{\"a\":1}"}},"finish_reason":"function_call"}]}`,
		`{"choices":[{"message":{"function_call":{"name":"f","arguments":{"a":1}}}},{"message":{"function_call":[]}}]}`,
		`{"choices":[{"message":{"tool_calls":[],"function_call":{"name":"f"}}},{"message":{"tool_calls":[{"id":"a"}],"function_call":{}}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := openaichat.API{}.NewCodec().DecodeAnswer(body)
		want, werr := refAnswer(body)
		for _, sentinel := range []error{api.ErrNotUTF8, api.ErrFoldedKey, openaichat.ErrShape, api.ErrTwoForms} {
			if errors.Is(err, sentinel) != errors.Is(werr, sentinel) {
				t.Fatalf("%q: DecodeAnswer error %v, encoding/json's %v", body, err, werr)
			}
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: DecodeAnswer error %v, encoding/json's %v", body, err, werr)
		}
		if err != nil {
			return
		}
		if got.Usage != want.Usage || len(got.Choices) != len(want.Choices) {
			t.Fatalf("%q: usage %v, %d choices; encoding/json reads %v, %d", body, got.Usage, len(got.Choices), want.Usage, len(want.Choices))
		}
		for i, g := range got.Choices {
			w := want.Choices[i]
			if g.ResponseID != w.ResponseID || g.Text != w.Text || g.Stop != w.Stop || g.Usage != w.Usage || !sameCalls(g.Calls, w.Calls) {
				t.Fatalf("%q: choice %d is %+v, encoding/json reads %+v", body, i, g, w)
			}
		}
	})
}

func sameCalls(a, b []neutral.ToolCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.ID != y.ID || x.Name != y.Name || x.Kind != y.Kind || x.BadShape != y.BadShape || string(x.Args) != string(y.Args) {
			return false
		}
	}
	return true
}
