package validate_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/validate"
)

// flightSchema is shaped like the load workload's search_flights: formats,
// patterns, enums, bounds, nested required, additionalProperties false.
const flightSchema = `{"type":"object","additionalProperties":false,
	"required":["origin","destination","departure_date","passengers"],
	"properties":{
		"origin":{"type":"string","pattern":"^[A-Z]{3}$"},
		"destination":{"type":"string","pattern":"^[A-Z]{3}$"},
		"departure_date":{"type":"string","format":"date"},
		"passengers":{"type":"object","required":["adults"],"properties":{
			"adults":{"type":"integer","minimum":1,"maximum":9}}},
		"cabin":{"enum":["economy","business"]},
		"max_price":{"type":"number","exclusiveMinimum":0,"multipleOf":0.01},
		"airlines":{"type":"array","items":{"type":"string","maxLength":2},"uniqueItems":true}}}`

// TestCheckFastPath: a call to a tool that reads only its schema is judged
// on its argument text, every way a schema reaches toolgate, with the
// report and findings of the full path: including the texts the fast path
// leaves to it (a name twice, an escaped name), which decode to something
// other than they read.
func TestCheckFastPath(t *testing.T) {
	ways := loadWays(t, flightSchema, "")
	const valid = `{"origin":"BER","destination":"SFO","departure_date":"2026-03-14","passengers":{"adults":2},` +
		`"cabin":"economy","max_price":1250.5,"airlines":["LH","UA"]}`
	expectReport(t, ways, valid, "-", "")
	for _, c := range [][3]string{
		{`{"origin":"BER","destination":"SFO","departure_date":"2026-03-14","passengers":{"adults":2},"origin":"ber"}`, "/origin", "pattern"},
		{`{"origin":"BER","destination":"SFO","departure_date":"2026-03-14","passengers":{"adults":2},"pass\u0065ngers":{"adults":0}}`, "/passengers/adults", "minimum"},
		{`{"orig\u0069n":"BER","destination":"SFO","departure_date":"2026-03-14","passengers":{"adults":2}}`, "-", ""},
		{`{"origin":"BER","destination":"SFO","departure_date":"2026-02-30","passengers":{"adults":2}}`, "/departure_date", "format"},
		{`{"origin":"BER","destination":"SFO","departure_date":"2026-03-14","passengers":{"adults":2.5}}`, "/passengers/adults", "type"},
		{`{"origin":"BER","destination":"SFO","departure_date":"2026-03-14","passengers":{"adults":2e0}}`, "-", ""},
		{`{"origin":"BER","destination":"SFO","departure_date":"2026-03-14","passengers":{"adults":2},"max_price":0.001}`, "/max_price", "multipleOf"},
		{`{"origin":"BER","destination":"SFO","departure_date":"2026-03-14","passengers":{"adults":2},"max_price":-0}`, "/max_price", "exclusiveMinimum"},
		{`{"origin":"BER","destination":"SFO","departure_date":"2026-03-14","passengers":{"adults":2},"airlines":["LH","L\u0048"]}`, "/airlines", "uniqueItems"},
		{`{"origin":"BER","destination":"SFO","departure_date":"2026-03-14","passengers":{"adults":2},"cabin":"first"}`, "/cabin", "enum"},
		{`{"origin":"BER","destination":"SFO","departure_date":"2026-03-14"}`, "", "required"},
		{`{"origin":"BER","destination":"SFO","departure_date":"2026-03-14","passengers":{"adults":2},"extra":1}`, "", "additionalProperties"},
	} {
		expectReport(t, ways, c[0], c[1], c[2])
	}

	// A name twice counts once, as it decodes.
	expectReport(t, loadWays(t, `{"type":"object","minProperties":2}`, ""), `{"a":1,"a":2}`, "", "minProperties")

	// Judging a valid call allocates for the format checker's argument
	// and little else; decoding the arguments and jsonschema v6 cost over
	// a hundred allocations on this call.
	for way, eff := range ways {
		cx := &validate.Context{Effective: eff, Evidence: validate.NewCorpus(nil)}
		call := fnCall("t", valid)
		allocs := testing.AllocsPerRun(50, func() {
			if v := validate.Check(call, cx); len(v.Findings) != 0 {
				t.Fatalf("%s: %+v", way, v.Findings)
			}
		})
		if allocs > 10 {
			t.Errorf("%s: a valid call costs %.0f allocations, want at most 10", way, allocs)
		}
	}
}

// TestCheckFastPathPatternTimeout: a pattern that runs out of time on the
// fast path is reported as on the full path, once.
func TestCheckFastPathPatternTimeout(t *testing.T) {
	hostile := strings.Repeat("a", 40) + "!"
	ways := loadWays(t, `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","pattern":"^(?=a)(a+)+$"}}}}`, "")
	for way, eff := range ways {
		v := validate.Check(fnCall("t", `{"tags":["aaa","`+hostile+`"]}`), &validate.Context{Effective: eff, Evidence: validate.NewCorpus(nil)})
		if v.Unvalidated != validate.PatternTimeout || len(v.Findings) != 1 {
			t.Fatalf("%s: report %+v, want one finding and unvalidated pattern_timeout", way, v)
		}
		if f := v.Findings[0]; f.Pointer != "/tags/1" || f.Keyword != "pattern" {
			t.Errorf("%s: finding %+v, want pattern at /tags/1", way, f)
		}
	}
}

// TestCheckNumberBeyondRat: a number jsonschema v6 cannot read (an exponent
// beyond ±1e6) under a numeric keyword made the library panic; the call
// now gets one blocking schema finding, from Check and from CheckJSON.
func TestCheckNumberBeyondRat(t *testing.T) {
	const schema = `{"type":"object","properties":{"n":{"type":"number","minimum":0}}}`
	const args = `{"n":1e1000001}`
	for way, eff := range loadWays(t, schema, "") {
		v := validate.Check(fnCall("t", args), &validate.Context{Effective: eff, Evidence: validate.NewCorpus(nil)})
		if v.Valid() || len(v.Findings) != 1 || v.Findings[0].Code != validate.SchemaViolation {
			t.Errorf("%s: report %+v, want one blocking schema finding", way, v)
		}
		tool, _, _ := eff.Lookup("t")
		if fs := validate.CheckJSON(tool.Schema, []byte(args), "structuredContent"); len(fs) != 1 || fs[0].Code != validate.SchemaViolation {
			t.Errorf("%s: CheckJSON findings %+v, want one schema finding", way, fs)
		}
	}
}
