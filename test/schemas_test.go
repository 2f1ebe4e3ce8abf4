package test

// Schemas end to end: JSON Schemas as generators and providers write them,
// judged through every API, plain and streamed (SPEC §3: ECMA-262
// patterns, exact numbers, formats, drafts).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// schemaAPI is one model API as the schema tests drive it: a request that
// offers one tool, and the upstream's answer holding one call.
type schemaAPI struct {
	name, path string
	request    func(tool string, schema json.RawMessage, stream bool) []byte
	answer     func(t *testing.T, tool, args string, stream bool) faultAction
}

func jsonOf(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var schemaChat = schemaAPI{
	name: "chat", path: "/v1/chat/completions",
	request: func(tool string, schema json.RawMessage, stream bool) []byte {
		b, _ := json.Marshal(map[string]any{"model": "gpt-4o", "stream": stream,
			"messages": []any{map[string]any{"role": "user", "content": "Do it."}},
			"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": tool, "parameters": schema}}}})
		return b
	},
	answer: func(t *testing.T, tool, args string, stream bool) faultAction {
		if stream {
			return fuSSE(fuConcat(fuTextEvents(), fuCallEvents("call_s1", tool, args)), 0)
		}
		return fuJSON(rawCallAnswer(rawCall(`"call_s1"`, jsonStr(tool), jsonStr(args))))
	},
}

var schemaMessages = schemaAPI{
	name: "messages", path: "/v1/messages",
	request: func(tool string, schema json.RawMessage, stream bool) []byte {
		b, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": stream,
			"messages": []any{map[string]any{"role": "user", "content": "Do it."}},
			"tools":    []any{map[string]any{"name": tool, "input_schema": schema}}})
		return b
	},
	answer: func(t *testing.T, tool, args string, stream bool) faultAction {
		msg := anthMsg("msg_s1", "tool_use", anthToolUse("toolu_s1", tool, args))
		if stream {
			return fuSSE([]string{anthSSE(t, msg)}, 0)
		}
		return fuJSON(msg)
	},
}

var schemaResponses = schemaAPI{
	name: "responses", path: "/v1/responses",
	request: func(tool string, schema json.RawMessage, stream bool) []byte {
		b, _ := json.Marshal(map[string]any{"model": "gpt-5", "stream": stream, "input": "Do it.",
			"tools": []any{map[string]any{"type": "function", "name": tool, "parameters": schema, "strict": false}}})
		return b
	},
	answer: func(t *testing.T, tool, args string, stream bool) faultAction {
		a := respAnswer{ID: "resp_s1", Items: []string{respCall("fc_s1", "call_s1", tool, args)}}
		if stream {
			return fuSSE([]string{string(respStreamOf(a, ""))}, 0)
		}
		return fuJSON(respObject(a, "completed", "", a.Items))
	},
}

// schemaRig is one toolgate and its upstream, reused by many exchanges.
type schemaRig struct {
	u *faultUpstream
	g *gate
}

// newSchemaRig starts toolgate with rest as extra top-level config (a
// catalog block or nothing: the request's tools are the catalog).
func newSchemaRig(t *testing.T, rest string, o app.Options) *schemaRig {
	t.Helper()
	u := newFaultUpstream(t, func(int, *faultRequest) faultAction { return fuStatus(500, "{}") })
	if o.Sink == nil {
		o.Sink = &recordingSink{}
	}
	g, _ := startGateWith(t, fuConfig(u, "", rest), o)
	return &schemaRig{u: u, g: g}
}

// schemaExchange is what one request through the rig produced.
type schemaExchange struct {
	res      fuResult
	upstream []faultRequest
	// first is the upstream's answer to the client's request, as sent.
	first []byte
}

// exchange sends one request offering tool with schema; the upstream
// answers every call, the first and any re-query, with args.
func (r *schemaRig) exchange(t *testing.T, api schemaAPI, stream bool, tool string, schema json.RawMessage, args string) schemaExchange {
	t.Helper()
	var first bytes.Buffer
	before := r.u.count()
	r.u.setScript(func(n int, _ *faultRequest) faultAction {
		act := api.answer(t, tool, args, stream)
		if n != before+1 {
			return act
		}
		return func(w http.ResponseWriter, req *http.Request) bool {
			return act(&teeWriter{ResponseWriter: w, buf: &first}, req)
		}
	})
	res := fuPost(t, r.g.URL, api.path, api.request(tool, schema, stream))
	return schemaExchange{res: res, upstream: r.u.requests()[before:], first: first.Bytes()}
}

// passedUnchanged fails unless the answer went out as the upstream sent
// it, after one upstream call.
func (x schemaExchange) passedUnchanged(t *testing.T, what string) {
	t.Helper()
	if x.res.Status != 200 || len(x.upstream) != 1 || !bytes.Equal(x.res.Body, x.first) {
		t.Errorf("%s: status %d after %d upstream calls, outcome %q; want the upstream's own bytes\nsent: %.400s\ngot:  %.400s",
			what, x.res.Status, len(x.upstream), x.res.Header.Get("X-Toolgate-Outcome"), x.first, x.res.Body)
	}
}

// reprompted fails unless toolgate re-asked the model naming ptr and then,
// the model insisting, escalated with a schema_violation at ptr whose
// keyword is one of kws.
func (x schemaExchange) reprompted(t *testing.T, what, ptr string, kws ...string) {
	t.Helper()
	if len(x.upstream) != 2 {
		t.Errorf("%s: %d upstream calls, want the call and one reprompt (status %d: %.300s)", what, len(x.upstream), x.res.Status, x.res.Body)
		return
	}
	if !bytes.Contains(x.upstream[1].Body, []byte("arguments"+ptr)) {
		t.Errorf("%s: the reprompt does not name arguments%s: %.600s", what, ptr, x.upstream[1].Body)
	}
	esc := findEscalation(x.res.Body)
	if esc == nil {
		t.Errorf("%s: no escalation in the answer (status %d): %.400s", what, x.res.Status, x.res.Body)
		return
	}
	for _, a := range esc.Attempts {
		for _, f := range a.Findings {
			for _, kw := range kws {
				if f.Code == "schema_violation" && f.Pointer == ptr && f.Keyword == kw {
					return
				}
			}
		}
	}
	t.Errorf("%s: escalation findings %+v, want schema_violation at %q with keyword in %v", what, esc.Attempts, ptr, kws)
}

// findEscalation finds the escalation object in a JSON body or in any
// event of a stream, whichever shape the API gives its errors.
func findEscalation(body []byte) *escalation {
	datas := []string{string(body)}
	datas = append(datas, sseData(body)...)
	for _, d := range datas {
		var v any
		if json.Unmarshal([]byte(d), &v) != nil {
			continue
		}
		if raw := escalationIn(v); raw != nil {
			var e escalation
			if json.Unmarshal(raw, &e) == nil {
				return &e
			}
		}
	}
	return nil
}

func escalationIn(v any) []byte {
	switch x := v.(type) {
	case map[string]any:
		if e, ok := x["escalation"].(map[string]any); ok && e["attempts"] != nil {
			b, _ := json.Marshal(e)
			return b
		}
		for _, c := range x {
			if b := escalationIn(c); b != nil {
				return b
			}
		}
	case []any:
		for _, c := range x {
			if b := escalationIn(c); b != nil {
				return b
			}
		}
	}
	return nil
}

// teeWriter keeps a copy of what the upstream wrote.
type teeWriter struct {
	http.ResponseWriter
	buf *bytes.Buffer
}

func (w *teeWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	return w.ResponseWriter.Write(p)
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// patternCase is a row of schema/testdata/ecma262-patterns.json.
type patternCase struct {
	Name    string `json:"name"`
	Pattern string `json:"pattern"`
	Valid   string `json:"valid"`
	Invalid string `json:"invalid"`
}

// TestSchemaECMA262Patterns: each ECMA-262 dialect difference (lookaround,
// \c, Unicode \s, ASCII \d and \w, named groups, ...) judged through Chat
// and Anthropic Messages, plain and streamed: the matching value passes
// with the upstream's own bytes, the other is reprompted at its pointer
// with keyword pattern.
func TestSchemaECMA262Patterns(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "schema", "testdata", "ecma262-patterns.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []patternCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	for _, api := range []schemaAPI{schemaChat, schemaMessages} {
		t.Run(api.name, func(t *testing.T) {
			rig := newSchemaRig(t, "", app.Options{})
			respModes(t, func(t *testing.T, stream bool) {
				for _, c := range cases {
					schema := jsonOf(t, map[string]any{"type": "object", "required": []string{"v"},
						"properties": map[string]any{"v": map[string]any{"type": "string", "pattern": c.Pattern}}})
					valid := string(jsonOf(t, map[string]string{"v": c.Valid}))
					invalid := string(jsonOf(t, map[string]string{"v": c.Invalid}))
					rig.exchange(t, api, stream, "set_value", schema, valid).passedUnchanged(t, c.Name+": "+valid)
					rig.exchange(t, api, stream, "set_value", schema, invalid).reprompted(t, c.Name+": "+invalid, "/v", "pattern")
				}
			})
		})
	}
}

// TestSchemaNumbersExact: numbers are judged as written on every API,
// plain and streamed: 1.0 is an integer, 2^53+1 and 40-digit integers are
// exact against maximum, const, enum and multipleOf; a passing answer goes
// out as the upstream's bytes, number spellings included.
func TestSchemaNumbersExact(t *testing.T) {
	const big40 = "1234567890123456789012345678901234567890"
	schema := json.RawMessage(`{"type":"object","properties":{"i":{"type":"integer"},"max":{"maximum":9007199254740992},` +
		`"c":{"const":9007199254740993},"e":{"enum":[` + big40 + `]},"m":{"multipleOf":10},"big":{"maximum":` + big40 + `}}}`)
	valid := `{"i":1.0,"max":9007199254740992,"c":9007199254740993,"e":` + big40 + `,"m":` + big40 + `,"big":1.2345678901234567890123456789012345678900e39}`
	invalid := []struct{ args, ptr, kw string }{
		{`{"i":1.5}`, "/i", "type"},
		{`{"max":9007199254740993}`, "/max", "maximum"},
		{`{"c":9007199254740992}`, "/c", "const"},
		{`{"e":1234567890123456789012345678901234567891}`, "/e", "enum"},
		{`{"m":1234567890123456789012345678901234567891}`, "/m", "multipleOf"},
		{`{"big":1234567890123456789012345678901234567891}`, "/big", "maximum"},
	}
	for _, api := range []schemaAPI{schemaChat, schemaMessages, schemaResponses} {
		t.Run(api.name, func(t *testing.T) {
			rig := newSchemaRig(t, "", app.Options{})
			respModes(t, func(t *testing.T, stream bool) {
				rig.exchange(t, api, stream, "set_numbers", schema, valid).passedUnchanged(t, valid)
				for _, c := range invalid {
					rig.exchange(t, api, stream, "set_numbers", schema, c.args).reprompted(t, c.args, c.ptr, c.kw)
				}
			})
		})
	}
}

// corpusCase is one generated schema with the calls to judge against it.
type corpusCase struct {
	Name      string          `json:"name"`
	Generator string          `json:"generator"`
	Schema    json.RawMessage `json:"schema"`
	Valid     json.RawMessage `json:"valid"`
	Invalid   []struct {
		Args     json.RawMessage `json:"args"`
		Pointer  string          `json:"pointer"`
		Keywords []string        `json:"keywords"`
	} `json:"invalid"`
}

// generatedCorpus is the corpus of test/node-schemas, made now by the
// pinned generators, followed by the recorded Pydantic schemas.
func generatedCorpus(t *testing.T) []corpusCase {
	t.Helper()
	node := needNodeIn(t, "node-schemas", "zod", "zod-to-json-schema", "zod4", "@sinclair/typebox",
		"valibot", "@valibot/to-json-schema", "openai", "ai")
	var cases []corpusCase
	if err := json.Unmarshal(runNodeIn(t, node, "node-schemas", "gen.mjs", 60*time.Second), &cases); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "pydantic", "*.json"))
	// One recording per model of gen_schemas.py, EmailStr's included.
	if err != nil || len(files) != 3 {
		t.Fatalf("recorded Pydantic schemas %q (%v), want create_ticket, invite and pay", files, err)
	}
	for _, f := range files {
		var c corpusCase
		if err := json.Unmarshal(readTestdata(t, strings.TrimPrefix(f, "testdata"+string(filepath.Separator))), &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		c.Name = "pydantic_" + strings.TrimSuffix(filepath.Base(f), ".json")
		cases = append(cases, c)
	}
	return cases
}

// corpusRigs starts one toolgate per way a schema reaches it: in
// catalog.tools, in a catalog.files tool file, and only in the request.
func corpusRigs(t *testing.T, name string, schema json.RawMessage) map[string]*schemaRig {
	t.Helper()
	var compact bytes.Buffer
	if err := json.Compact(&compact, schema); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tools.json")
	tools := `[{"type":"function","function":{"name":"` + name + `","parameters":` + compact.String() + `}}]`
	if err := os.WriteFile(file, []byte(tools), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]*schemaRig{
		"catalog.tools": newSchemaRig(t, "catalog:\n  tools:\n    - name: "+name+"\n      parameters: "+compact.String()+"\n", app.Options{}),
		"catalog.files": newSchemaRig(t, "catalog:\n  files: ["+strconv.Quote(file)+"]\n", app.Options{}),
		"request tools": newSchemaRig(t, "", app.Options{}),
	}
}

// TestSchemaGeneratedCorpus: schemas as Zod 3 (zod-to-json-schema), Zod 4
// (z.toJSONSchema), TypeBox, Valibot, openai's zodFunction, the AI SDK's
// zodSchema and jsonSchema, and Pydantic v2 write them load from
// catalog.tools, catalog.files and a request's tools; a valid call passes
// with the upstream's bytes, each invalid one is reprompted with its
// pointer and keyword.
func TestSchemaGeneratedCorpus(t *testing.T) {
	for _, c := range generatedCorpus(t) {
		t.Run(c.Name, func(t *testing.T) {
			for way, rig := range corpusRigs(t, "tool_"+c.Name, c.Schema) {
				x := rig.exchange(t, schemaChat, false, "tool_"+c.Name, c.Schema, string(c.Valid))
				x.passedUnchanged(t, c.Generator+", "+way+": valid call")
				for _, bad := range c.Invalid {
					x := rig.exchange(t, schemaChat, false, "tool_"+c.Name, c.Schema, string(bad.Args))
					x.reprompted(t, c.Generator+", "+way+": "+string(bad.Args), bad.Pointer, bad.Keywords...)
				}
			}
		})
	}
}

var uncompilableRuns atomic.Int64

// TestSchemaUncompilableRequestTool: a request tool whose schema toolgate
// cannot compile (a remote $ref, an invalid pattern) stays a real tool:
// calls with an object pass unchanged on every API, plain and streamed,
// each counted in toolgate_unvalidated_total{reason="schema_uncompilable"},
// and the schema is logged once however many requests offer it; arguments
// that are no object are still reprompted.
func TestSchemaUncompilableRequestTool(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	rig := newSchemaRig(t, "", app.Options{Logger: zap.New(core)})
	counter := rig.g.App.Metrics.Unvalidated.WithLabelValues("schema_uncompilable")
	// The "logged once" memory is the process's: a $comment of this run's
	// own makes these schemas new to it under go test -count=N too.
	run := fmt.Sprintf(`"$comment":"run %d",`, uncompilableRuns.Add(1))
	schemas := map[string]json.RawMessage{
		"remote ref":    json.RawMessage(`{` + run + `"type":"object","properties":{"order":{"$ref":"https://schemas.example.com/order.json"}}}`),
		"invalid regex": json.RawMessage(`{` + run + `"type":"object","properties":{"v":{"type":"string","pattern":"(unclosed"}}}`),
	}
	calls := 0
	for name, schema := range schemas {
		for _, api := range []schemaAPI{schemaChat, schemaMessages, schemaResponses} {
			respModes(t, func(t *testing.T, stream bool) {
				rig.exchange(t, api, stream, "lookup", schema, `{"order":{"id":7},"v":"x"}`).passedUnchanged(t, name+" "+api.name)
				calls++
				if n := testutil.ToFloat64(counter); n != float64(calls) {
					t.Errorf("%s %s: unvalidated schema_uncompilable = %v, want %d", name, api.name, n, calls)
				}
			})
		}
		x := rig.exchange(t, schemaChat, false, "lookup", schema, `["not","an","object"]`)
		if len(x.upstream) != 2 || findEscalation(x.res.Body) == nil {
			t.Errorf("%s: arguments that are no object: %d upstream calls, %.300s", name, len(x.upstream), x.res.Body)
		}
	}
	if n := logs.FilterMessageSnippet("schema does not compile").Len(); n != len(schemas) {
		t.Errorf("%d log lines about uncompilable schemas, want one per schema (%d)", n, len(schemas))
	}
}

// TestSchemaPatternTimeout: a pattern that backtracks catastrophically on
// the model's value is stopped at its budget: the call is reprompted at
// the value's pointer with keyword pattern, never passed unchecked, and
// counted in toolgate_unvalidated_total{reason="pattern_timeout"}.
func TestSchemaPatternTimeout(t *testing.T) {
	rig := newSchemaRig(t, "", app.Options{})
	counter := rig.g.App.Metrics.Unvalidated.WithLabelValues("pattern_timeout")
	schema := json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","pattern":"^(?=a)(a+)+$"}}}`)
	args := `{"code":"` + strings.Repeat("a", 40) + `!"}`
	rig.exchange(t, schemaChat, false, "set_code", schema, args).reprompted(t, "hostile value", "/code", "pattern")
	if n := testutil.ToFloat64(counter); n != 1 {
		t.Errorf("unvalidated pattern_timeout = %v, want 1 (the reprompt's answer is not counted again)", n)
	}
}
