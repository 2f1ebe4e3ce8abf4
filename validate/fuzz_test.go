package validate_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/validate"
)

var knownCodes = map[validate.Code]bool{
	validate.UnknownTool: true, validate.ToolNotOffered: true, validate.ToolNotInCatalog: true,
	validate.MalformedArguments: true, validate.SchemaViolation: true, validate.Provenance: true,
	validate.ProvenanceUnverifiable: true, validate.RuleViolation: true,
}

// FuzzCheck feeds arbitrary names and argument bytes to Check. Whatever the
// input, Check must not panic, must speak only the closed set of codes, and
// must never call something valid whose arguments are not a JSON object that
// passes the tool's schema.
func FuzzCheck(f *testing.F) {
	seeds := []struct {
		name string
		args string
	}{
		{"get_order", `{"order_id":"ord_1"}`},
		{"get_order", `{"order_id":"ord_12","customer_ids":["cus_a",1]}`},
		{"default_api:get_order", `{"order_id":"ord_1","amount":250}`},
		{"create_shipment", `{"carrier":"ups","items":[{"sku":"a","qty":0}],"destination":"usa"}`},
		{"create_shipment", `{"carrier":"dhl","destination":{"country":"DE"},"weight_kg":1.5}`},
		{"issue_refund", `{"order_id":"ord_1","amount_cents":100001}`},
		{"flag_review", `{}`},
		{"run_sql", `select 1`},
		{"archive_order", `{}`},
		{"outside_tool", `{}`},
		{"nope", `{"a":`},
		{"get_order", "{\"order_id\":\"\xff\"}"},
		{"get_order", `{"order_id":"ord_1"} {}`},
		{"get_order", strings.Repeat("[", 200)},
	}
	for i, s := range seeds {
		f.Add(s.name, []byte(s.args), uint8(i%3), i%5 == 0)
	}
	cx := testContext(f)
	f.Fuzz(func(t *testing.T, name string, args []byte, kind uint8, badShape bool) {
		c := validate.ToolCall{ID: "call_f", Name: name, Args: args, Kind: validate.Kind(kind % 3), BadShape: badShape}
		v := validate.Check(c, cx)
		for _, fd := range v.Findings {
			if !knownCodes[fd.Code] {
				t.Fatalf("code %q outside the closed set", fd.Code)
			}
			if fd.Message == "" {
				t.Fatalf("finding without a message: %+v", fd)
			}
			if !utf8.ValidString(fd.Message) {
				t.Fatalf("message is not UTF-8: %q", fd.Message)
			}
		}
		if c.Kind == validate.Other {
			if len(v.Findings) != 0 || v.Tool != nil {
				t.Fatalf("an Other call was judged: %+v", v)
			}
			return
		}
		if !v.Valid() {
			if v.Worst() == validate.ClassNone {
				t.Fatalf("invalid report with no blocking class: %+v", v.Findings)
			}
			return
		}
		if v.Tool == nil {
			t.Fatalf("valid report without a tool for %q", name)
		}
		if c.Kind != validate.Function {
			return
		}
		if c.BadShape {
			t.Fatal("a badly shaped call was valid")
		}
		trimmed := bytes.TrimSpace(args)
		if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) || !utf8.Valid(args) {
			t.Fatalf("valid report for arguments that are not a JSON object: %q", args)
		}
		if v.Tool.Schema != nil {
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
			if err != nil {
				t.Fatalf("arguments do not decode: %v", err)
			}
			if err := v.Tool.Schema.Validate(doc); err != nil {
				t.Fatalf("valid report for arguments failing the schema: %v", err)
			}
		}
	})
}

// FuzzCorpusSeen checks Seen against properties that need no second
// implementation: a token is always seen in a text that is just that token,
// or that token between spaces; a seen token occurs in the text or in a
// JSON-decoded string of it; and nothing panics.
func FuzzCorpusSeen(f *testing.F) {
	for _, s := range [][2]string{
		{"look at ord_1.", "ord_1"}, {"xord_12", "ord_1"}, {`{"a":"Jos\u00e9"}`, "José"},
		{"“ord_1”", "ord_1"}, {"", ""}, {"aaa", "aa"}, {"\xff\xfe", "\xfe"}, {"café", "caf"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, text, token string) {
		got := validate.NewCorpus([]string{text}).Seen(token)
		if token == "" {
			if got {
				t.Fatal("the empty token was seen")
			}
			return
		}
		if got && !strings.Contains(text, token) && !strings.Contains(text, `\`) {
			t.Fatalf("Seen(%q) in %q without the token in the text", token, text)
		}
		if !validate.NewCorpus([]string{token}).Seen(token) {
			t.Fatalf("Seen(%q) in a text of just that token = false", token)
		}
		if !validate.NewCorpus([]string{"a", " " + token + " ", "b"}).Seen(token) {
			t.Fatalf("Seen(%q) between spaces = false", token)
		}
	})
}
