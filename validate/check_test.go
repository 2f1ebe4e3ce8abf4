package validate_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/validate"
)

// testConfig is a catalog that exercises every kind of check: schemas with
// the common keywords, provenance pointers, CEL rules, a confirm tool, a tool
// without parameters (used for custom calls) and a catalog tool the tests
// never offer.
const testConfig = `
upstreams:
  - url: https://api.example.com
catalog:
  unlisted: reject
  strip_prefixes: ["default_api:", "functions."]
  tools:
    - name: get_order
      description: Look up one order by its id.
      parameters:
        type: object
        properties:
          order_id: {type: string, pattern: "^ord_[0-9]+$"}
          customer_ids: {type: array, items: {type: string}}
          amount: {type: integer}
          tags: {type: object}
        required: [order_id]
        additionalProperties: false
      provenance: [/order_id, /customer_ids, /amount, /tags]
    - name: create_shipment
      description: Ship items of an order.
      parameters:
        type: object
        properties:
          carrier: {type: string, enum: [ups, dhl, fedex]}
          weight_kg: {type: number, minimum: 0}
          items:
            type: array
            items:
              type: object
              properties:
                sku: {type: string}
                qty: {type: integer, minimum: 1}
              required: [sku, qty]
          destination:
            oneOf:
              - {type: string, pattern: "^[A-Z]{2}$"}
              - {type: object, properties: {country: {type: string}}, required: [country]}
          not_po_box: {not: {type: string, pattern: "^PO"}}
          legacy: false
        required: [carrier]
    - name: issue_refund
      description: Refund part or all of an order.
      policy: confirm
      parameters:
        type: object
        properties:
          order_id: {type: string}
          amount_cents: {type: integer}
        required: [order_id, amount_cents]
      rules:
        - expr: "args.amount_cents <= 100000"
          message: refunds above 1000.00 need a person
    - name: flag_review
      description: Flag a review for moderation.
      parameters:
        type: object
        properties:
          score: {type: integer}
      rules:
        - expr: "args.score > 3"
          message: only scores above 3 may be flagged
    - name: run_sql
      description: Run a read-only SQL query (a custom tool with free text input).
    - name: archive_order
      description: Archive an order. Never offered by the tests.
      parameters: {type: object}
`

// offeredNames are the tools every test request offers; "outside_tool" is
// not in the catalog, so unlisted: reject turns it into tool_not_in_catalog.
var offeredNames = []string{"get_order", "create_shipment", "issue_refund", "flag_review", "run_sql", "outside_tool"}

func compileTestSnapshot(t testing.TB, yaml string) *catalog.Snapshot {
	t.Helper()
	cfg, err := catalog.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return snap
}

func offerTools(names ...string) []catalog.Offered {
	out := make([]catalog.Offered, len(names))
	for i, n := range names {
		out[i] = catalog.Offered{Name: n, Parameters: []byte(`{"type":"object"}`)}
	}
	return out
}

func testEffective(t testing.TB) *catalog.Effective {
	t.Helper()
	return compileTestSnapshot(t, testConfig).Effective(offerTools(offeredNames...), catalog.ToolChoice{}, true)
}

// testContext vouches for the identifiers a user would have typed.
func testContext(t testing.TB) *validate.Context {
	return &validate.Context{
		Effective: testEffective(t),
		Evidence:  validate.NewCorpus([]string{"please look at ord_1 for cus_a and cus_b, amount 250", "tool said: ord_77"}),
	}
}

func fnCall(name, args string) validate.ToolCall {
	return validate.ToolCall{ID: "call_1", Name: name, Args: []byte(args), Kind: validate.Function}
}

func findingCodes(v validate.CallReport) []validate.Code {
	out := make([]validate.Code, len(v.Findings))
	for i, f := range v.Findings {
		out[i] = f.Code
	}
	return out
}

func equalCodes(a, b []validate.Code) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCheckNames(t *testing.T) {
	cx := testContext(t)
	tests := []struct {
		name     string
		call     validate.ToolCall
		want     []validate.Code
		tool     string // resolved tool, "" for none
		stripped bool
	}{
		{"exact name", fnCall("get_order", `{"order_id":"ord_1"}`), nil, "get_order", false},
		{"invented name", fnCall("database_query", `{}`), []validate.Code{validate.UnknownTool}, "", false},
		{"catalog tool not offered", fnCall("archive_order", `{}`), []validate.Code{validate.ToolNotOffered}, "", false},
		{"offered but not in catalog", fnCall("outside_tool", `{}`), []validate.Code{validate.ToolNotInCatalog}, "", false},
		{"empty name", fnCall("", `{}`), []validate.Code{validate.UnknownTool}, "", false},
		{"prefix stripped", fnCall("default_api:get_order", `{"order_id":"ord_1"}`), nil, "get_order", true},
		{"second prefix stripped", fnCall("functions.get_order", `{"order_id":"ord_1"}`), nil, "get_order", true},
		{"stripped name not offered", fnCall("functions.archive_order", `{}`), []validate.Code{validate.ToolNotOffered}, "", true},
		{"prefix case differs", fnCall("Default_API:get_order", `{"order_id":"ord_1"}`), []validate.Code{validate.UnknownTool}, "", false},
		{"name case differs after prefix", fnCall("default_api:Get_Order", `{"order_id":"ord_1"}`), []validate.Code{validate.UnknownTool}, "", false},
		{"name case differs", fnCall("GET_ORDER", `{"order_id":"ord_1"}`), []validate.Code{validate.UnknownTool}, "", false},
		{"prefix alone", fnCall("default_api:", `{}`), []validate.Code{validate.UnknownTool}, "", false},
		{"prefix twice", fnCall("default_api:default_api:get_order", `{"order_id":"ord_1"}`), []validate.Code{validate.UnknownTool}, "", false},
		{"prefix without separator", fnCall("default_apiget_order", `{"order_id":"ord_1"}`), []validate.Code{validate.UnknownTool}, "", false},
		{"suffix is not a prefix", fnCall("get_order:default_api", `{}`), []validate.Code{validate.UnknownTool}, "", false},
		{"trailing space", fnCall("get_order ", `{"order_id":"ord_1"}`), []validate.Code{validate.UnknownTool}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(tc.call, cx)
			if got := findingCodes(v); !equalCodes(got, tc.want) {
				t.Fatalf("codes = %v, want %v (findings %+v)", got, tc.want, v.Findings)
			}
			if v.Stripped != tc.stripped {
				t.Errorf("Stripped = %v, want %v", v.Stripped, tc.stripped)
			}
			gotTool := ""
			if v.Tool != nil {
				gotTool = v.Tool.Name
			}
			if gotTool != tc.tool {
				t.Errorf("Tool = %q, want %q", gotTool, tc.tool)
			}
			if v.Valid() != (len(tc.want) == 0) {
				t.Errorf("Valid() = %v with findings %v", v.Valid(), tc.want)
			}
			for _, f := range v.Findings {
				if strings.Contains(f.Message, tc.call.Name) && tc.call.Name != "" {
					t.Errorf("Message %q repeats the model-chosen name", f.Message)
				}
			}
		})
	}
}

func TestCheckCallKinds(t *testing.T) {
	cx := testContext(t)
	tests := []struct {
		name string
		call validate.ToolCall
		want []validate.Code
	}{
		{"custom call checked by name only", validate.ToolCall{Name: "run_sql", Args: []byte("SELECT * FROM t"), Kind: validate.Custom}, nil},
		{"custom call with JSON-ish garbage", validate.ToolCall{Name: "run_sql", Args: []byte("{not json"), Kind: validate.Custom}, nil},
		{"custom call to a tool with a JSON schema is the wrong shape", validate.ToolCall{Name: "get_order", Args: []byte(`{"order_id":"ord_1"}`), Kind: validate.Custom}, []validate.Code{validate.MalformedArguments}},
		{"custom call with a bad name", validate.ToolCall{Name: "run_shell", Args: []byte("ls"), Kind: validate.Custom}, []validate.Code{validate.UnknownTool}},
		{"custom call with BadShape is still name only", validate.ToolCall{Name: "run_sql", Kind: validate.Custom, BadShape: true}, nil},
		{"other call passes untouched", validate.ToolCall{Name: "web_search", Args: []byte("\xff"), Kind: validate.Other}, nil},
		{"other call with no name", validate.ToolCall{Kind: validate.Other}, nil},
		{"function call to parameterless tool", fnCall("run_sql", `{"anything":[1,2]}`), nil},
		{"function call to parameterless tool still needs an object", fnCall("run_sql", `[]`), []validate.Code{validate.MalformedArguments}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(tc.call, cx)
			if got := findingCodes(v); !equalCodes(got, tc.want) {
				t.Fatalf("codes = %v, want %v (findings %+v)", got, tc.want, v.Findings)
			}
		})
	}
}

func TestCheckMalformedArguments(t *testing.T) {
	cx := testContext(t)
	huge := append([]byte(`{"order_id":"ord_1","pad":"`), bytes.Repeat([]byte("a"), 8<<20)...)
	huge = append(huge, `"}`...)
	deep := strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000)
	deepArr := `{"a":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "}"
	tests := []struct {
		name     string
		args     []byte
		badShape bool
	}{
		{"not JSON", []byte(`order_id=ord_1`), false},
		{"trailing garbage", []byte(`{"order_id":"ord_1"} extra`), false},
		{"two objects", []byte(`{"order_id":"ord_1"}{"order_id":"ord_1"}`), false},
		{"array", []byte(`[{"order_id":"ord_1"}]`), false},
		{"string", []byte(`"{\"order_id\":\"ord_1\"}"`), false},
		{"number", []byte(`42`), false},
		{"null", []byte(`null`), false},
		{"empty", []byte(``), false},
		{"whitespace only", []byte(" \n\t "), false},
		{"truncated", []byte(`{"order_id":"ord_`), false},
		{"single quotes", []byte(`{'order_id':'ord_1'}`), false},
		{"trailing comma", []byte(`{"order_id":"ord_1",}`), false},
		{"invalid UTF-8", []byte("{\"order_id\":\"ord_1\xff\"}"), false},
		{"bad shape from the codec", []byte(`{"order_id":"ord_1"}`), true},
		{"100k-deep objects", []byte(deep), false},
		{"100k-deep arrays", []byte(deepArr), false},
		{"over 8 MiB", huge, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fnCall("get_order", string(tc.args))
			c.BadShape = tc.badShape
			start := time.Now()
			v := validate.Check(c, cx)
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Check took %v", d)
			}
			if got := findingCodes(v); !equalCodes(got, []validate.Code{validate.MalformedArguments}) {
				t.Fatalf("codes = %v, want [malformed_arguments] (findings %+v)", got, v.Findings)
			}
			f := v.Findings[0]
			if f.Message == "" || f.Detail == "" || f.Pointer != "" {
				t.Errorf("finding = %+v", f)
			}
			if v.Tool == nil || v.Tool.Name != "get_order" {
				t.Errorf("Tool = %v, want get_order resolved", v.Tool)
			}
			if len(f.Message) > 200 {
				t.Errorf("Message is %d bytes; it must not echo the arguments", len(f.Message))
			}
		})
	}
}

// TestCheckJustUnder8MiB makes sure the size bound is a bound, not a
// rejection of everything large.
func TestCheckJustUnder8MiB(t *testing.T) {
	cx := testContext(t)
	prefix := `{"order_id":"ord_1","customer_ids":["`
	suffix := `"]}`
	pad := (8 << 20) - len(prefix) - len(suffix)
	args := prefix + strings.Repeat("a", pad) + suffix
	if len(args) != 8<<20 {
		t.Fatalf("built %d bytes", len(args))
	}
	v := validate.Check(fnCall("get_order", args), cx)
	for _, f := range v.Findings {
		if f.Code == validate.MalformedArguments {
			t.Fatalf("exactly 8 MiB was refused: %+v", f)
		}
	}
}

func TestCheckSchemaViolations(t *testing.T) {
	cx := testContext(t)
	type want struct {
		pointer string
		keyword string
	}
	tests := []struct {
		name string
		tool string
		args string
		want []want
	}{
		{"type", "get_order", `{"order_id":12}`, []want{{"/order_id", "type"}}},
		{"required", "get_order", `{}`, []want{{"", "required"}}},
		{"additionalProperties", "get_order", `{"order_id":"ord_1","extra":true}`, []want{{"", "additionalProperties"}}},
		{"enum", "create_shipment", `{"carrier":"pigeon"}`, []want{{"/carrier", "enum"}}},
		{"minimum", "create_shipment", `{"carrier":"ups","weight_kg":-1}`, []want{{"/weight_kg", "minimum"}}},
		{"pattern", "get_order", `{"order_id":"order-1"}`, []want{{"/order_id", "pattern"}}},
		{"not", "create_shipment", `{"carrier":"ups","not_po_box":"PO 12"}`, []want{{"/not_po_box", "not"}}},
		{"false schema", "create_shipment", `{"carrier":"ups","legacy":1}`, []want{{"/legacy", "false"}}},
		{"nested array item", "create_shipment", `{"carrier":"ups","items":[{"sku":"a","qty":0}]}`, []want{{"/items/0/qty", "minimum"}}},
		{"nested array item type", "create_shipment", `{"carrier":"ups","items":[{"sku":"a","qty":1},{"sku":"b","qty":"2"}]}`, []want{{"/items/1/qty", "type"}}},
		{"nested required", "create_shipment", `{"carrier":"ups","items":[{"qty":1}]}`, []want{{"/items/0", "required"}}},
		{"two bad fields", "create_shipment", `{"carrier":"pigeon","weight_kg":-5}`, []want{{"/carrier", "enum"}, {"/weight_kg", "minimum"}}},
		{"three bad array items", "create_shipment", `{"carrier":"ups","items":[{"sku":"a","qty":0},{"sku":1,"qty":1},{"sku":"c","qty":-2}]}`,
			[]want{{"/items/0/qty", "minimum"}, {"/items/1/sku", "type"}, {"/items/2/qty", "minimum"}}},
		{"missing field and wrong type", "get_order", `{"customer_ids":"cus_a"}`, []want{{"", "required"}, {"/customer_ids", "type"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(fnCall(tc.tool, tc.args), cx)
			if v.Valid() {
				t.Fatal("Valid() = true")
			}
			got := map[want]bool{}
			for _, f := range v.Findings {
				if f.Code != validate.SchemaViolation {
					t.Errorf("unexpected finding %+v", f)
					continue
				}
				if f.Message == "" || f.Detail == "" {
					t.Errorf("empty text in %+v", f)
				}
				if !strings.HasPrefix(f.Message, "arguments"+f.Pointer+": ") {
					t.Errorf("Message %q does not lead with its pointer %q", f.Message, f.Pointer)
				}
				got[want{f.Pointer, f.Keyword}] = true
			}
			if len(got) != len(tc.want) || len(v.Findings) != len(tc.want) {
				t.Errorf("findings = %+v, want exactly %v", v.Findings, tc.want)
			}
			for _, w := range tc.want {
				if !got[w] {
					t.Errorf("missing finding at %q keyword %q; got %+v", w.pointer, w.keyword, v.Findings)
				}
			}
		})
	}
}

// TestCheckOneOf pins how a failed oneOf is reported: every branch's reason
// reaches the model, each with the location it is about.
func TestCheckOneOf(t *testing.T) {
	cx := testContext(t)
	tests := []struct {
		name     string
		args     string
		valid    bool
		keywords []string
	}{
		{"first branch matches", `{"carrier":"ups","destination":"US"}`, true, nil},
		{"second branch matches", `{"carrier":"ups","destination":{"country":"US"}}`, true, nil},
		{"no branch matches", `{"carrier":"ups","destination":"usa"}`, false, []string{"pattern", "type"}},
		{"neither shape", `{"carrier":"ups","destination":7}`, false, []string{"type", "type"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(fnCall("create_shipment", tc.args), cx)
			if v.Valid() != tc.valid {
				t.Fatalf("Valid() = %v, findings %+v", v.Valid(), v.Findings)
			}
			var kws []string
			for _, f := range v.Findings {
				if f.Code != validate.SchemaViolation || !strings.HasPrefix(f.Pointer, "/destination") {
					t.Errorf("unexpected finding %+v", f)
				}
				kws = append(kws, f.Keyword)
			}
			if strings.Join(kws, ",") != strings.Join(tc.keywords, ",") {
				t.Errorf("keywords = %v, want %v", kws, tc.keywords)
			}
		})
	}
}

// TestCheckMessagesNeverQuoteValues: Message goes to logs and sinks, so the
// argument values the model produced (which may be secrets a user pasted)
// must stay out of it. Detail, sent only to the model, may quote them.
func TestCheckMessagesNeverQuoteValues(t *testing.T) {
	cx := testContext(t)
	const secret = "sk-live-9f8e7d6c5b4a39281706"
	tests := []struct {
		name string
		tool string
		args string
	}{
		{"pattern", "get_order", `{"order_id":"` + secret + `"}`},
		{"enum", "create_shipment", `{"carrier":"` + secret + `"}`},
		{"type", "get_order", `{"order_id":"ord_1","amount":"` + secret + `"}`},
		{"nested", "create_shipment", `{"carrier":"ups","items":[{"sku":"a","qty":"` + secret + `"}]}`},
		{"oneOf", "create_shipment", `{"carrier":"ups","destination":"` + secret + `"}`},
		{"not", "create_shipment", `{"carrier":"ups","not_po_box":"PO ` + secret + `"}`},
		{"malformed", "get_order", `{"order_id":"` + secret + `"`},
		{"malformed with trailing text", "get_order", `{"order_id":"ord_1"} ` + secret},
		{"provenance", "get_order", `{"order_id":"ord_999","customer_ids":["` + secret + `"]}`},
		{"rule", "issue_refund", `{"order_id":"` + secret + `","amount_cents":100001}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(fnCall(tc.tool, tc.args), cx)
			if v.Valid() {
				t.Fatalf("expected a finding, got %+v", v.Findings)
			}
			for _, f := range v.Findings {
				for _, part := range []string{secret, "9f8e7d6c5b4a"} {
					if strings.Contains(f.Message, part) {
						t.Errorf("Message quotes the value: %q", f.Message)
					}
				}
			}
		})
	}
	t.Run("detail may quote the value for the model", func(t *testing.T) {
		v := validate.Check(fnCall("get_order", `{"order_id":"`+secret+`"}`), cx)
		if len(v.Findings) != 1 || !strings.Contains(v.Findings[0].Detail, secret) {
			t.Errorf("Detail should tell the model which value failed: %+v", v.Findings)
		}
	})
}

func TestCheckProvenance(t *testing.T) {
	cx := testContext(t)
	tests := []struct {
		name    string
		args    string
		want    []validate.Code
		pointer string
	}{
		{"seen in user text", `{"order_id":"ord_1"}`, nil, ""},
		{"seen in a tool result", `{"order_id":"ord_77"}`, nil, ""},
		{"only inside a longer token", `{"order_id":"ord_12"}`, []validate.Code{validate.Provenance}, "/order_id"},
		{"value is a prefix of a seen token", `{"order_id":"ord_7"}`, []validate.Code{validate.Provenance}, "/order_id"},
		{"invented", `{"order_id":"ord_404"}`, []validate.Code{validate.Provenance}, "/order_id"},
		{"array elements all seen", `{"order_id":"ord_1","customer_ids":["cus_a","cus_b"]}`, nil, ""},
		{"one array element unseen", `{"order_id":"ord_1","customer_ids":["cus_a","cus_z"]}`, []validate.Code{validate.Provenance}, "/customer_ids"},
		{"empty array needs nothing", `{"order_id":"ord_1","customer_ids":[]}`, nil, ""},
		{"number seen", `{"order_id":"ord_1","amount":250}`, nil, ""},
		{"number unseen", `{"order_id":"ord_1","amount":25}`, []validate.Code{validate.Provenance}, "/amount"},
		{"absent optional pointer", `{"order_id":"ord_1"}`, nil, ""},
		{"object value carries no identifier", `{"order_id":"ord_1","tags":{"x":"never said"}}`, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(fnCall("get_order", tc.args), cx)
			if got := findingCodes(v); !equalCodes(got, tc.want) {
				t.Fatalf("codes = %v, want %v (findings %+v)", got, tc.want, v.Findings)
			}
			if len(tc.want) > 0 {
				f := v.Findings[0]
				if f.Pointer != tc.pointer {
					t.Errorf("Pointer = %q, want %q", f.Pointer, tc.pointer)
				}
				if v.Valid() {
					t.Error("a provenance finding must block the call")
				}
			}
		})
	}
	t.Run("prefixed tool name is checked the same", func(t *testing.T) {
		v := validate.Check(fnCall("default_api:get_order", `{"order_id":"ord_404"}`), cx)
		if got := findingCodes(v); !equalCodes(got, []validate.Code{validate.Provenance}) {
			t.Errorf("codes = %v", got)
		}
	})
	t.Run("schema failure skips provenance", func(t *testing.T) {
		v := validate.Check(fnCall("get_order", `{"order_id":"ord_404","amount":"x"}`), cx)
		for _, f := range v.Findings {
			if f.Code != validate.SchemaViolation {
				t.Errorf("unexpected %+v", f)
			}
		}
	})
}

func TestCheckProvenanceUnverifiable(t *testing.T) {
	eff := testEffective(t)
	corpus := validate.NewCorpus([]string{"ord_1"})
	tests := []struct {
		name string
		cx   *validate.Context
		args string
		want []validate.Code
	}{
		{"no evidence", &validate.Context{Effective: eff}, `{"order_id":"ord_1"}`, []validate.Code{validate.ProvenanceUnverifiable}},
		{"history upstream", &validate.Context{Effective: eff, Evidence: corpus, HistoryUpstream: true}, `{"order_id":"ord_1"}`, []validate.Code{validate.ProvenanceUnverifiable}},
		{"history upstream, invented value", &validate.Context{Effective: eff, Evidence: corpus, HistoryUpstream: true}, `{"order_id":"ord_9"}`, []validate.Code{validate.ProvenanceUnverifiable}},
		{"one per present pointer", &validate.Context{Effective: eff}, `{"order_id":"ord_1","amount":3}`, []validate.Code{validate.ProvenanceUnverifiable, validate.ProvenanceUnverifiable}},
		{"absent pointers need nothing", &validate.Context{Effective: eff}, `{"order_id":"ord_1","customer_ids":["a"]}`, []validate.Code{validate.ProvenanceUnverifiable, validate.ProvenanceUnverifiable}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(fnCall("get_order", tc.args), tc.cx)
			if got := findingCodes(v); !equalCodes(got, tc.want) {
				t.Fatalf("codes = %v, want %v", got, tc.want)
			}
			if !v.Valid() {
				t.Error("provenance_unverifiable must not block the call")
			}
			if v.Worst() != validate.ClassNone {
				t.Errorf("Worst() = %v, want ClassNone", v.Worst())
			}
			for _, f := range v.Findings {
				if f.Pointer == "" || f.Blocking() {
					t.Errorf("finding = %+v", f)
				}
			}
		})
	}
}

func TestCheckRules(t *testing.T) {
	cx := testContext(t)
	tests := []struct {
		name    string
		tool    string
		args    string
		want    []validate.Code
		message string
	}{
		{"rule true", "issue_refund", `{"order_id":"ord_1","amount_cents":100000}`, nil, ""},
		{"rule false", "issue_refund", `{"order_id":"ord_1","amount_cents":100001}`, []validate.Code{validate.RuleViolation}, "refunds above 1000.00 need a person"},
		{"rule over a float that is integral", "issue_refund", `{"order_id":"ord_1","amount_cents":5.0}`, nil, ""},
		{"rule true on present key", "flag_review", `{"score":4}`, nil, ""},
		{"rule false on present key", "flag_review", `{"score":2}`, []validate.Code{validate.RuleViolation}, "only scores above 3 may be flagged"},
		{"rule cannot evaluate a missing key", "flag_review", `{}`, []validate.Code{validate.RuleViolation}, "rule could not be evaluated: only scores above 3 may be flagged"},
		{"schema failure skips rules", "issue_refund", `{"order_id":"ord_1","amount_cents":"lots"}`, []validate.Code{validate.SchemaViolation}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(fnCall(tc.tool, tc.args), cx)
			if got := findingCodes(v); !equalCodes(got, tc.want) {
				t.Fatalf("codes = %v, want %v (findings %+v)", got, tc.want, v.Findings)
			}
			if tc.message != "" {
				f := v.Findings[0]
				if f.Message != tc.message || f.Keyword != "rule" {
					t.Errorf("finding = %+v, want message %q keyword rule", f, tc.message)
				}
			}
		})
	}
}

// TestCheckRequestSchemaThatDoesNotCompile: a request tool whose schema
// toolgate cannot compile stays a real tool. Its calls are checked as far as
// they can be (a JSON object) and pass marked unvalidated: re-asking the
// model about a schema nobody here can check would only end in an
// escalation of every call.
func TestCheckRequestSchemaThatDoesNotCompile(t *testing.T) {
	snap := compileTestSnapshot(t, "upstreams:\n  - url: https://api.example.com\n")
	eff := snap.Effective([]catalog.Offered{
		{Name: "broken", Parameters: []byte(`{"type":"object","properties":{"a":{"pattern":"(unclosed"}}}`)},
		{Name: "remote", Parameters: []byte(`{"$ref":"https://schemas.example.com/order.json"}`)},
		{Name: "fine", Parameters: []byte(`{"type":"object","properties":{"a":{"type":"string"}}}`)},
		{Name: "none"},
	}, catalog.ToolChoice{}, true)
	cx := &validate.Context{Effective: eff, Evidence: validate.NewCorpus(nil)}
	tests := []struct {
		name        string
		call        validate.ToolCall
		want        []validate.Code
		unvalidated validate.Unvalidated
	}{
		{"broken schema", fnCall("broken", `{"a":"x"}`), nil, validate.SchemaUncompilable},
		{"remote ref", fnCall("remote", `{"order":1}`), nil, validate.SchemaUncompilable},
		{"broken schema, malformed args", fnCall("broken", `nope`), []validate.Code{validate.MalformedArguments}, ""},
		{"broken schema, array args", fnCall("broken", `[1]`), []validate.Code{validate.MalformedArguments}, ""},
		{"working request schema", fnCall("fine", `{"a":"x"}`), nil, ""},
		{"working request schema, bad value", fnCall("fine", `{"a":1}`), []validate.Code{validate.SchemaViolation}, ""},
		{"no schema at all", fnCall("none", `{"anything":1}`), nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(tc.call, cx)
			if got := findingCodes(v); !equalCodes(got, tc.want) {
				t.Fatalf("codes = %v, want %v (findings %+v)", got, tc.want, v.Findings)
			}
			if v.Unvalidated != tc.unvalidated {
				t.Errorf("unvalidated = %q, want %q", v.Unvalidated, tc.unvalidated)
			}
			if v.Tool == nil {
				t.Error("the tool is not resolved")
			}
			for _, f := range v.Findings {
				if f.Message == "" {
					t.Errorf("empty message: %+v", f)
				}
			}
		})
	}
}

func TestCallReportWorst(t *testing.T) {
	f := func(cs ...validate.Code) validate.CallReport {
		var v validate.CallReport
		for _, c := range cs {
			v.Findings = append(v.Findings, validate.Finding{Code: c})
		}
		return v
	}
	tests := []struct {
		name  string
		v     validate.CallReport
		want  validate.Class
		valid bool
	}{
		{"none", f(), validate.ClassNone, true},
		{"unverifiable only", f(validate.ProvenanceUnverifiable), validate.ClassNone, true},
		{"args", f(validate.SchemaViolation, validate.RuleViolation), validate.ClassArgs, false},
		{"name beats args", f(validate.SchemaViolation, validate.UnknownTool), validate.ClassName, false},
		{"name beats args in either order", f(validate.ToolNotOffered, validate.Provenance), validate.ClassName, false},
		{"final beats name", f(validate.UnknownTool, validate.Truncated), validate.ClassFinal, false},
		{"final beats args", f(validate.ConfirmationRequired, validate.MalformedArguments), validate.ClassFinal, false},
		{"unverifiable does not lower args", f(validate.Provenance, validate.ProvenanceUnverifiable), validate.ClassArgs, false},
		{"unknown code is not blocking", f(validate.Code("something_new")), validate.ClassNone, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.v.Worst(); got != tc.want {
				t.Errorf("Worst() = %v, want %v", got, tc.want)
			}
			if got := tc.v.Valid(); got != tc.valid {
				t.Errorf("Valid() = %v, want %v", got, tc.valid)
			}
		})
	}
}

func TestCallReportCodes(t *testing.T) {
	v := validate.CallReport{Findings: []validate.Finding{
		{Code: validate.SchemaViolation}, {Code: validate.Provenance}, {Code: validate.SchemaViolation}, {Code: validate.RuleViolation},
	}}
	want := []validate.Code{validate.SchemaViolation, validate.Provenance, validate.RuleViolation}
	if got := v.Codes(); !equalCodes(got, want) {
		t.Errorf("Codes() = %v, want %v", got, want)
	}
	if got := (&validate.CallReport{}).Codes(); len(got) != 0 {
		t.Errorf("empty report Codes() = %v", got)
	}
}

func TestCodeClass(t *testing.T) {
	tests := []struct {
		code     validate.Code
		wire     string
		class    validate.Class
		blocking bool
	}{
		{validate.UnknownTool, "unknown_tool", validate.ClassName, true},
		{validate.ToolNotOffered, "tool_not_offered", validate.ClassName, true},
		{validate.ToolNotInCatalog, "tool_not_in_catalog", validate.ClassName, true},
		{validate.MalformedArguments, "malformed_arguments", validate.ClassArgs, true},
		{validate.SchemaViolation, "schema_violation", validate.ClassArgs, true},
		{validate.Provenance, "provenance", validate.ClassArgs, true},
		{validate.ProvenanceUnverifiable, "provenance_unverifiable", validate.ClassNone, false},
		{validate.RuleViolation, "rule_violation", validate.ClassArgs, true},
		{validate.ConfirmationRequired, "confirmation_required", validate.ClassFinal, true},
		{validate.Truncated, "truncated", validate.ClassFinal, true},
		{validate.Code(""), "", validate.ClassNone, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.code)+"_", func(t *testing.T) {
			if string(tc.code) != tc.wire {
				t.Errorf("wire spelling %q, want %q", tc.code, tc.wire)
			}
			if got := tc.code.Class(); got != tc.class {
				t.Errorf("Class() = %v, want %v", got, tc.class)
			}
			if got := (validate.Finding{Code: tc.code}).Blocking(); got != tc.blocking {
				t.Errorf("Blocking() = %v, want %v", got, tc.blocking)
			}
		})
	}
}

// TestCheckEveryFindingHasText: callers show Message in escalations and send
// Detail to the model, so neither may be empty for any code Check emits.
func TestCheckEveryFindingHasText(t *testing.T) {
	cx := testContext(t)
	calls := []validate.ToolCall{
		fnCall("nope", `{}`), fnCall("archive_order", `{}`), fnCall("outside_tool", `{}`), fnCall("get_order", `x`),
		fnCall("get_order", `{"order_id":1,"zzz":2}`), fnCall("get_order", `{"order_id":"ord_5"}`),
		fnCall("issue_refund", `{"order_id":"ord_1","amount_cents":1e9}`), fnCall("flag_review", `{}`),
	}
	for _, c := range calls {
		v := validate.Check(c, cx)
		if len(v.Findings) == 0 {
			t.Errorf("%s %s: no findings", c.Name, c.Args)
		}
		for _, f := range v.Findings {
			if f.Message == "" || f.Detail == "" {
				t.Errorf("%s %s: finding without text: %+v", c.Name, c.Args, f)
			}
		}
	}
}

// TestCheckDeepButValid: nesting that encoding/json still accepts reaches
// the schema validator, provenance and CEL, none of which may fall over.
func TestCheckDeepButValid(t *testing.T) {
	cx := testContext(t)
	deep := strings.Repeat(`{"a":`, 9000) + `"x"` + strings.Repeat("}", 9000)
	tests := []struct {
		name string
		call validate.ToolCall
		want []validate.Code
	}{
		{"deep object under a provenance pointer", fnCall("get_order", `{"order_id":"ord_1","tags":`+deep+`}`), nil},
		{"deep object where a string belongs", fnCall("get_order", `{"order_id":`+deep+`}`), []validate.Code{validate.SchemaViolation}},
		{"deep object seen by a rule", fnCall("flag_review", `{"score":5,"extra":`+deep+`}`), nil},
		{"deep array in a schemaless tool", fnCall("run_sql", `{"q":`+strings.Repeat("[", 9000)+strings.Repeat("]", 9000)+`}`), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(tc.call, cx)
			if got := findingCodes(v); !equalCodes(got, tc.want) {
				t.Fatalf("codes = %v, want %v", got, tc.want)
			}
		})
	}
}
