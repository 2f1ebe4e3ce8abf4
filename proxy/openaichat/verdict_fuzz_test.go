package openaichat_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/proxy/sse"
	"github.com/toolgate/toolgate/validate"
)

// refRegexp is the reference's ECMA-262 engine: regexp2 in ECMAScript mode
// alone, without toolgate's RE2 fast path or dialect checks.
type refRegexp struct{ re *regexp2.Regexp }

var errRefTimeout = errors.New("reference pattern timed out")

func (r refRegexp) MatchString(s string) bool {
	ok, err := r.re.MatchString(s)
	if err != nil {
		panic(errRefTimeout)
	}
	return ok
}

func (r refRegexp) String() string { return r.re.String() }

func refCompilePattern(p string) (jsonschema.Regexp, error) {
	re, err := regexp2.Compile(p, regexp2.ECMAScript|regexp2.Unicode)
	if err != nil {
		if re, err = regexp2.Compile(p, regexp2.ECMAScript); err != nil {
			return nil, err
		}
	}
	re.MatchTimeout = 1e8
	return refRegexp{re}, nil
}

type refNoLoader struct{}

func (refNoLoader) Load(string) (any, error) { return nil, errors.New("no external references") }

// refVerdict judges args against schema with jsonschema v6 on
// encoding/json with UseNumber: compiled reports whether the schema
// compiled, valid whether args pass.
func refVerdict(schema, args []byte) (compiled, valid, skip bool) {
	defer func() {
		if r := recover(); r != nil {
			if r != errRefTimeout {
				panic(r)
			}
			skip = true
		}
	}()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return false, false, false
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refNoLoader{})
	c.UseRegexpEngine(refCompilePattern)
	if c.AddResource("mem://s.json", doc) != nil {
		return false, false, false
	}
	sch, err := c.Compile("mem://s.json")
	if err != nil {
		return false, false, false
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return true, false, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return true, false, false
	}
	if _, ok := v.(map[string]any); !ok {
		return true, false, false
	}
	return true, sch.Validate(v) == nil, false
}

// verdictAnswers are the same call as a plain chat.completion and as a
// stream whose argument fragments are cut at the rune offsets in cuts.
func verdictAnswers(args string, cuts []byte) (plain, stream []byte) {
	quoted, _ := json.Marshal(args)
	call := `{"id":"call_f","type":"function","function":{"name":"t","arguments":` + string(quoted) + `}}`
	plain = []byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		call + `]},"finish_reason":"tool_calls"}]}`)
	chunk := func(delta, finish string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	var b strings.Builder
	b.WriteString(chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_f","type":"function","function":{"name":"t","arguments":""}}]}`, "null"))
	runes := []rune(args)
	at := 0
	for _, c := range append(cuts, 255) {
		end := min(len(runes), at+int(c)%16+1)
		if c == 255 {
			end = len(runes)
		}
		frag, _ := json.Marshal(string(runes[at:end]))
		b.WriteString(chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(frag)+`}}]}`, "null"))
		if at = end; at == len(runes) {
			break
		}
	}
	b.WriteString(chunk(`{}`, `"tool_calls"`))
	b.WriteString("data: [DONE]\n\n")
	return plain, []byte(b.String())
}

// streamedCall assembles the stream through the codec, as the pipeline does.
func streamedCall(t *testing.T, body []byte) (validate.ToolCall, bool) {
	st := openaichat.API{}.NewCodec().NewStream()
	rd := sse.NewReader(bytes.NewReader(body), 0)
	for rd.Next() {
		ev := rd.Event()
		if _, err := st.Feed(&ev); err != nil {
			return validate.ToolCall{}, false
		}
	}
	turns := st.Turns()
	if len(turns) != 1 || len(turns[0].Calls) != 1 {
		t.Fatalf("stream assembled %d turns", len(turns))
	}
	return turns[0].Calls[0], true
}

// FuzzVerdictMatchesJSONSchema: toolgate's verdict on a call, read from a
// plain answer and from a stream, is the verdict of jsonschema v6 run
// directly on the arguments decoded by encoding/json with UseNumber, for
// any schema both compile and any arguments (numbers, Unicode strings,
// deep nesting).
func FuzzVerdictMatchesJSONSchema(f *testing.F) {
	seeds := [][2]string{
		{`{"type":"object","properties":{"n":{"type":"integer","maximum":9007199254740992}}}`, `{"n":9007199254740993}`},
		{`{"type":"object","properties":{"n":{"type":"integer","maximum":9007199254740992}}}`, `{"n":9007199254740992.0}`},
		{`{"properties":{"n":{"multipleOf":0.01}}}`, `{"n":19.99}`},
		{`{"properties":{"n":{"enum":[1234567890123456789012345678901234567890]}}}`, `{"n":1234567890123456789012345678901234567890}`},
		{`{"properties":{"n":{"const":1}}}`, `{"n":1.0e0}`},
		{`{"properties":{"s":{"pattern":"^\\s+$"}}}`, `{"s":"\u00a0\u2028\ufeff"}`},
		{`{"properties":{"s":{"pattern":"^(?<!x)\\w+(?=!)"}}}`, `{"s":"héllo!"}`},
		{`{"patternProperties":{"^\\p{L}+$":{"type":"integer"}}}`, `{"Grüße":"x","日本":1}`},
		{`{"properties":{"s":{"format":"date-time"}}}`, `{"s":"2026-13-45T00:00:00Z"}`},
		{`{"properties":{"s":{"format":"email","maxLength":5}}}`, `{"s":"a@b.co"}`},
		{`{"$defs":{"n":{"type":"object","properties":{"c":{"$ref":"#/$defs/n"}},"additionalProperties":false}},"$ref":"#/$defs/n"}`,
			`{"c":{"c":{"c":{"c":{"c":{"c":{"c":{"c":{"x":1}}}}}}}}}`},
		{`{"type":"object","properties":{"a":{"type":"array","items":{"type":["string","null"]},"uniqueItems":true}}}`, `{"a":["😀","😀"]}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"properties":{"v":{"$ref":"#/definitions/s","maxLength":1}}}`, `{"v":"long"}`},
		{`{"properties":{"v":false,"w":true}}`, `{"w":{"deep":[[[[[[]]]]]]},"v":null}`},
		{`{"type":"object"}`, `{"a":1,"a":"dup"}`},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], []byte{3, 1, 7})
	}
	cfg, err := catalog.Parse([]byte("upstreams:\n  - url: https://api.example.com\n"), "fuzz.yaml")
	if err != nil {
		f.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, schema, args string, cuts []byte) {
		if len(schema) > 4096 || len(args) > 4096 || !utf8.ValidString(args) || !json.Valid([]byte(schema)) {
			return
		}
		compiled, want, skip := refVerdict([]byte(schema), []byte(args))
		if !compiled || skip {
			return
		}
		eff := snap.Effective([]catalog.Offered{{Name: "t", Parameters: json.RawMessage(schema)}}, catalog.ToolChoice{}, true)
		if tool, _, _ := eff.Lookup("t"); tool == nil || tool.SchemaError != nil {
			return // not ECMA-262 (regexp2 also takes .NET syntax) or past a limit
		}
		cx := &validate.Context{Effective: eff, Evidence: validate.NewCorpus(nil)}
		plain, stream := verdictAnswers(args, cuts)
		resp, err := openaichat.API{}.NewCodec().DecodeAnswer(plain)
		if err != nil {
			t.Fatalf("plain answer does not parse: %v", err)
		}
		pv := validate.Check(resp.Choices[0].Calls[0], cx)
		if pv.Unvalidated == validate.PatternTimeout {
			return
		}
		if pv.Valid() != want {
			t.Fatalf("plain: toolgate valid=%v, jsonschema valid=%v; findings %+v\nschema %s\nargs %s", pv.Valid(), want, pv.Findings, schema, args)
		}
		sc, ok := streamedCall(t, stream)
		if !ok {
			t.Fatalf("the stream of a plain-valid answer is refused")
		}
		if !bytes.Equal(sc.Args, resp.Choices[0].Calls[0].Args) {
			t.Fatalf("streamed arguments %q differ from the plain ones %q", sc.Args, resp.Choices[0].Calls[0].Args)
		}
		if sv := validate.Check(sc, cx); sv.Valid() != want {
			t.Fatalf("stream: toolgate valid=%v, jsonschema valid=%v; findings %+v", sv.Valid(), want, sv.Findings)
		}
	})
}
