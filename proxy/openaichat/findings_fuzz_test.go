package openaichat_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/validate"
)

// findingsFixture is the fixtures' two-tool request turned into what the
// pipeline judges with, plus an independent compilation of each tool's
// schema to check the validator's verdicts against.
type findingsFixture struct {
	cx      *validate.Context
	schemas map[string]*jsonschema.Schema
}

func loadFindingsFixture(t testing.TB) findingsFixture {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := openaichat.API{}.NewCodec().DecodeRequest("", body)
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	cfg, err := catalog.Parse([]byte("upstreams:\n  - url: https://api.example.com\n"), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	eff := snap.Effective(req.Offered, catalog.ToolChoice{}, true)
	if eff.Len() != 2 {
		t.Fatalf("effective catalog has %d tools, want 2", eff.Len())
	}

	var wire struct {
		Tools []struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Schema{}
	for _, tl := range wire.Tools {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(tl.Function.Parameters))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		url := "mem://" + tl.Function.Name + ".json"
		if err := c.AddResource(url, doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile(url)
		if err != nil {
			t.Fatal(err)
		}
		schemas[tl.Function.Name] = sch
	}
	return findingsFixture{cx: &validate.Context{Effective: eff, Evidence: validate.NewCorpus(req.Vouching)}, schemas: schemas}
}

// checkAnswer parses body as the upstream's answer and judges every call.
// It fails when a call the validator calls valid is not, judged
// independently, a call of one of the two tools with arguments that are a
// JSON object passing that tool's schema.
func (fx findingsFixture) checkAnswer(t *testing.T, body []byte) (verdicts []validate.CallReport, parsed bool) {
	t.Helper()
	resp, err := openaichat.API{}.NewCodec().DecodeAnswer(body)
	if err != nil {
		return nil, false
	}
	for _, turn := range resp.Choices {
		for _, c := range turn.Calls {
			v := validate.Check(c, fx.cx)
			verdicts = append(verdicts, v)
			// Other kinds pass untouched by design (SPEC §3).
			if c.Kind == validate.Other || !v.Valid() {
				continue
			}
			sch, ok := fx.schemas[c.Name]
			if !ok {
				t.Fatalf("call to %q judged valid; the request offers no such tool", c.Name)
			}
			if c.Kind != validate.Function {
				t.Fatalf("a %v call to function tool %q judged valid", c.Kind, c.Name)
			}
			trimmed := bytes.TrimSpace(c.Args)
			if len(trimmed) == 0 || trimmed[0] != '{' {
				t.Fatalf("call to %q judged valid with non-object arguments %q", c.Name, c.Args)
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
			if err != nil {
				t.Fatalf("call to %q judged valid with unparsable arguments %q: %v", c.Name, c.Args, err)
			}
			if _, isObj := doc.(map[string]any); !isObj {
				t.Fatalf("call to %q judged valid with non-object arguments %q", c.Name, c.Args)
			}
			if err := sch.Validate(doc); err != nil {
				t.Fatalf("call to %q judged valid but fails its schema: %v\narguments %s", c.Name, err, c.Args)
			}
		}
	}
	return verdicts, true
}

// chatVariants are negative cases made from the fixtures, as the fixtures'
// README suggests: each renames a tool or breaks an argument.
func chatVariants(t testing.TB) map[string][]byte {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	one, two := read("tool_call.json"), read("parallel_tool_calls.json")
	const args = `"{\"location\":\"Boston, MA\",\"unit\":\"celsius\"}"`
	mustReplace := func(s, old, new string) []byte {
		if !strings.Contains(s, old) {
			t.Fatalf("fixture lacks %s", old)
		}
		return []byte(strings.Replace(s, old, new, 1))
	}
	return map[string][]byte{
		"single":            []byte(one),
		"parallel":          []byte(two),
		"renamed tool":      mustReplace(one, `"get_current_weather"`, `"get_weather"`),
		"bad enum":          mustReplace(one, `celsius`, `kelvin`),
		"missing required":  mustReplace(one, args, `"{\"unit\":\"celsius\"}"`),
		"extra field":       mustReplace(one, args, `"{\"location\":\"Boston, MA\",\"when\":\"now\"}"`),
		"not JSON":          mustReplace(one, args, `"{\"location\":\"Boston"`),
		"arguments object":  mustReplace(one, args, `{"location":"Boston, MA"}`),
		"arguments array":   mustReplace(one, args, `"[1,2]"`),
		"custom call":       mustReplace(one, `"type": "function",`+"\n            "+`"function": {`, `"type": "custom", "custom": {"input": "x",`),
		"second renamed":    mustReplace(two, `"get_stock_price"`, `"get_stock_quote"`),
		"second wrong type": mustReplace(two, `"{\"ticker\": \"AAPL\", \"exchange\": \"NASDAQ\"}"`, `"{\"ticker\": 7, \"exchange\": \"NASDAQ\"}"`),
		"no choices":        []byte(`{"id":"x","choices":[]}`),
	}
}

func TestChatFindingsFixtures(t *testing.T) {
	fx := loadFindingsFixture(t)
	tests := map[string][][]validate.Code{
		"single":            {nil},
		"parallel":          {nil, nil},
		"renamed tool":      {{validate.UnknownTool}},
		"bad enum":          {{validate.SchemaViolation}},
		"missing required":  {{validate.SchemaViolation}},
		"extra field":       {nil}, // the fixture schema allows additional properties
		"not JSON":          {{validate.MalformedArguments}},
		"arguments object":  {{validate.MalformedArguments}},
		"arguments array":   {{validate.MalformedArguments}},
		"custom call":       {{validate.MalformedArguments}},
		"second renamed":    {nil, {validate.UnknownTool}},
		"second wrong type": {nil, {validate.SchemaViolation}},
		"no choices":        nil,
	}
	variants := chatVariants(t)
	for name, body := range variants {
		t.Run(name, func(t *testing.T) {
			want, ok := tests[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			verdicts, parsed := fx.checkAnswer(t, body)
			if !parsed {
				t.Fatal("the answer did not parse")
			}
			if len(verdicts) != len(want) {
				t.Fatalf("%d calls, want %d", len(verdicts), len(want))
			}
			for i, v := range verdicts {
				var got []validate.Code
				for _, f := range v.Findings {
					got = append(got, f.Code)
				}
				if strings.Join(codeStrings(got), ",") != strings.Join(codeStrings(want[i]), ",") {
					t.Errorf("call %d codes = %v, want %v", i, got, want[i])
				}
			}
		})
	}
}

func codeStrings(cs []validate.Code) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// FuzzChatFindings feeds arbitrary bytes to the codec as a non-streaming
// upstream answer and judges every call it finds against the fixtures'
// two-tool catalog. Nothing may panic, and whatever the validator lets
// through must be a real call with arguments that pass the schema.
func FuzzChatFindings(f *testing.F) {
	variants := chatVariants(f)
	keys := make([]string, 0, len(variants))
	for k := range variants {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f.Add(variants[k])
	}
	f.Add([]byte(`{"choices":[{"message":{"tool_calls":[{"id":"a","type":"function","function":{"name":"get_stock_price","arguments":"{\"ticker\":\"AAPL\",\"exchange\":\"NASDAQ\"}"}}]}}]}`))
	f.Add([]byte(`{"choices":[{"message":{"tool_calls":[{"function":{"name":"get_current_weather","arguments":"{\"location\":\"x\"}"}}]},"finish_reason":"length"}]}`))
	// The legacy form: a function_call, valid, invented and badly argued.
	f.Add([]byte(`{"choices":[{"message":{"function_call":{"name":"get_stock_price","arguments":"{\"ticker\":\"AAPL\",\"exchange\":\"NASDAQ\"}"}},"finish_reason":"function_call"}]}`))
	f.Add([]byte(`{"choices":[{"message":{"function_call":{"name":"fetch_quote","arguments":"{}"}}},{"message":{"function_call":{"name":"get_current_weather","arguments":"{\"unit\":1}"}}}]}`))
	fx := loadFindingsFixture(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _ = fx.checkAnswer(t, body)
	})
}
