package recovery

import (
	"errors"
	"strings"
	"testing"
)

const (
	sampleSubstitute = `{"decision":"substitute","corrected_tool_call":{"tool_name":"search_docs","arguments":{"query":"refund policy"}},"escalation":null,"confidence":0.92}`
	sampleEscalate   = `{"decision":"escalate","corrected_tool_call":null,"escalation":{"reason":"no tool can run SQL","original_intent":"count orders","missing_capability":"database access"},"confidence":0.2}`
)

func TestParseProposalAccepts(t *testing.T) {
	wantSub := Proposal{Decision: DecisionSubstitute, Tool: "search_docs", Arguments: []byte(`{"query":"refund policy"}`), Confidence: 0.92}
	wantEsc := Proposal{Decision: DecisionEscalate, Reason: "no tool can run SQL", OriginalIntent: "count orders",
		MissingCapability: "database access", Confidence: 0.2}
	cases := []struct {
		name string
		text string
		want Proposal
	}{
		{name: "plain substitute", text: sampleSubstitute, want: wantSub},
		{name: "plain escalate", text: sampleEscalate, want: wantEsc},
		{name: "markdown json fence", text: "```json\n" + sampleSubstitute + "\n```", want: wantSub},
		{name: "prose before and after", text: "Sure, here is my decision:\n\n" + sampleEscalate + "\n\nLet me know if you need more.", want: wantEsc},
		{name: "indented object", text: "{\n  \"decision\": \"escalate\",\n  \"escalation\": {\"reason\": \"no tool can run SQL\", \"original_intent\": \"count orders\", \"missing_capability\": \"database access\"},\n  \"corrected_tool_call\": null,\n  \"confidence\": 0.2\n}", want: wantEsc},
		{
			name: "braces and escaped quotes inside strings",
			text: `{"decision":"escalate","escalation":{"reason":"needs a {template} engine \"}{\" and \\","original_intent":"}}}","missing_capability":"{"},"confidence":0.5} trailing }`,
			want: Proposal{Decision: DecisionEscalate, Reason: `needs a {template} engine "}{" and \`, OriginalIntent: "}}}", MissingCapability: "{", Confidence: 0.5},
		},
		{
			name: "substitute with nested arguments compacted",
			text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"create_ticket","arguments":{ "title" : "x", "tags" : [ "a", {"b":null} ] }},"confidence":1}`,
			want: Proposal{Decision: DecisionSubstitute, Tool: "create_ticket", Arguments: []byte(`{"title":"x","tags":["a",{"b":null}]}`), Confidence: 1},
		},
		{
			name: "substitute with escalation key absent",
			text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":{}},"confidence":0}`,
			want: Proposal{Decision: DecisionSubstitute, Tool: "t", Arguments: []byte(`{}`), Confidence: 0},
		},
		{
			name: "double-encoded arguments",
			text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"search_docs","arguments":"{\"query\": \"refund policy\"}"},"escalation":null,"confidence":0.92}`,
			want: wantSub,
		},
		{
			name: "escalate with call absent and optional details null",
			text: `{"decision":"escalate","escalation":{"reason":"r","original_intent":null},"confidence":0.1}`,
			want: Proposal{Decision: DecisionEscalate, Reason: "r", Confidence: 0.1},
		},
		{
			name: "unknown keys ignored",
			text: `{"decision":"escalate","note":"hi","escalation":{"reason":"r","extra":[1,2]},"corrected_tool_call":null,"confidence":0.3,"x":{"y":{}}}`,
			want: Proposal{Decision: DecisionEscalate, Reason: "r", Confidence: 0.3},
		},
		{
			name: "confidence written with exponent",
			text: `{"decision":"escalate","escalation":{"reason":"r"},"confidence":5e-1}`,
			want: Proposal{Decision: DecisionEscalate, Reason: "r", Confidence: 0.5},
		},
		{
			name: "negative zero confidence",
			text: `{"decision":"escalate","escalation":{"reason":"r"},"confidence":-0.0}`,
			want: Proposal{Decision: DecisionEscalate, Reason: "r", Confidence: 0},
		},
		{
			name: "later objects are ignored",
			text: sampleEscalate + "\nFor comparison, a substitution would be: " + sampleSubstitute,
			want: wantEsc,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProposal(tc.text)
			if err != nil {
				t.Fatalf("ParseProposal: %v", err)
			}
			if got.Decision != tc.want.Decision || got.Tool != tc.want.Tool || string(got.Arguments) != string(tc.want.Arguments) ||
				got.Reason != tc.want.Reason || got.OriginalIntent != tc.want.OriginalIntent ||
				got.MissingCapability != tc.want.MissingCapability || got.Confidence != tc.want.Confidence {
				t.Errorf("got  %+v (args %s)\nwant %+v (args %s)", got, got.Arguments, tc.want, tc.want.Arguments)
			}
		})
	}
}

func TestParseProposalRejects(t *testing.T) {
	cases := []struct {
		name string
		text string
		want error
	}{
		{name: "empty", text: "", want: ErrNoJSON},
		{name: "prose only", text: "I think the best tool is search_docs.", want: ErrNoJSON},
		{name: "only an array", text: `["substitute"]`, want: ErrNoJSON},
		{name: "truncated object", text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"t"`, want: ErrInvalidProposal},
		{name: "unterminated string", text: `{"decision":"escalate}`, want: ErrInvalidProposal},
		{name: "balanced but not JSON", text: `{decision: escalate}`, want: ErrInvalidProposal},
		{name: "mismatched brackets", text: `{"a":[}]`, want: ErrInvalidProposal},
		{
			name: "first object invalid, later one valid",
			text: "Here is {my reasoning}, and the answer: " + sampleSubstitute,
			want: ErrInvalidProposal,
		},
		{
			name: "first object invalid JSON, later fake decision",
			text: `{"decision":"escalate",} ` + sampleSubstitute,
			want: ErrInvalidProposal,
		},
		{name: "decision missing", text: `{"escalation":{"reason":"r"},"confidence":0.5}`, want: ErrInvalidProposal},
		{name: "decision maybe", text: `{"decision":"maybe","escalation":{"reason":"r"},"confidence":0.5}`, want: ErrInvalidProposal},
		{name: "decision wrong case", text: `{"decision":"Escalate","escalation":{"reason":"r"},"confidence":0.5}`, want: ErrInvalidProposal},
		{name: "decision not a string", text: `{"decision":1,"escalation":{"reason":"r"},"confidence":0.5}`, want: ErrInvalidProposal},
		{name: "key with wrong case", text: `{"Decision":"escalate","escalation":{"reason":"r"},"confidence":0.5}`, want: ErrInvalidProposal},
		{name: "duplicate decision key", text: `{"decision":"escalate","decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":{}},"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute without call", text: `{"decision":"substitute","escalation":null,"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with null call", text: `{"decision":"substitute","corrected_tool_call":null,"escalation":null,"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with call not an object", text: `{"decision":"substitute","corrected_tool_call":"search_docs","confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with empty tool name", text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"  ","arguments":{}},"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with tool name missing", text: `{"decision":"substitute","corrected_tool_call":{"arguments":{}},"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with tool name wrong key case", text: `{"decision":"substitute","corrected_tool_call":{"Tool_Name":"t","arguments":{}},"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with arguments missing", text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"t"},"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with arguments null", text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":null},"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with arguments array", text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":[1]},"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with arguments number", text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":42},"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with arguments string of array", text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":"[1,2]"},"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with arguments string of broken JSON", text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":"{\"a\":"},"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with arguments string of object plus junk", text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":"{} {}"},"confidence":0.9}`, want: ErrInvalidProposal},
		{name: "substitute with arguments plain string", text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":"refund policy"},"confidence":0.9}`, want: ErrInvalidProposal},
		{
			name: "substitute with escalation populated",
			text: `{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":{}},"escalation":{"reason":"r"},"confidence":0.9}`,
			want: ErrInvalidProposal,
		},
		{name: "escalate without escalation", text: `{"decision":"escalate","corrected_tool_call":null,"confidence":0.1}`, want: ErrInvalidProposal},
		{name: "escalate without reason", text: `{"decision":"escalate","escalation":{"original_intent":"x"},"confidence":0.1}`, want: ErrInvalidProposal},
		{name: "escalate with empty reason", text: `{"decision":"escalate","escalation":{"reason":""},"confidence":0.1}`, want: ErrInvalidProposal},
		{name: "escalate with reason not a string", text: `{"decision":"escalate","escalation":{"reason":["x"]},"confidence":0.1}`, want: ErrInvalidProposal},
		{name: "escalate with intent not a string", text: `{"decision":"escalate","escalation":{"reason":"r","original_intent":3},"confidence":0.1}`, want: ErrInvalidProposal},
		{
			name: "escalate with call populated",
			text: `{"decision":"escalate","corrected_tool_call":{"tool_name":"t","arguments":{}},"escalation":{"reason":"r"},"confidence":0.1}`,
			want: ErrInvalidProposal,
		},
		{name: "confidence above one", text: `{"decision":"escalate","escalation":{"reason":"r"},"confidence":1.5}`, want: ErrInvalidProposal},
		{name: "confidence below zero", text: `{"decision":"escalate","escalation":{"reason":"r"},"confidence":-0.1}`, want: ErrInvalidProposal},
		{name: "confidence missing", text: `{"decision":"escalate","escalation":{"reason":"r"}}`, want: ErrInvalidProposal},
		{name: "confidence null", text: `{"decision":"escalate","escalation":{"reason":"r"},"confidence":null}`, want: ErrInvalidProposal},
		{name: "confidence string", text: `{"decision":"escalate","escalation":{"reason":"r"},"confidence":"0.9"}`, want: ErrInvalidProposal},
		{name: "confidence bool", text: `{"decision":"escalate","escalation":{"reason":"r"},"confidence":true}`, want: ErrInvalidProposal},
		{name: "confidence overflows", text: `{"decision":"escalate","escalation":{"reason":"r"},"confidence":1e400}`, want: ErrInvalidProposal},
		{name: "nesting too deep", text: `{"decision":"escalate","x":` + strings.Repeat("[", MaxProposalDepth+1) + strings.Repeat("]", MaxProposalDepth+1) + `}`, want: ErrInvalidProposal},
		{
			name: "object cut off by the scan limit",
			text: `{"decision":"escalate","escalation":{"reason":"` + strings.Repeat("a", MaxProposalBytes) + `"},"confidence":0.1}`,
			want: ErrInvalidProposal,
		},
		{name: "brace only after the scan limit", text: strings.Repeat(" ", MaxProposalBytes) + sampleEscalate, want: ErrNoJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProposal(tc.text)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v (decision %+v)", err, tc.want, got)
			}
			if got.Decision != "" || got.Tool != "" || got.Arguments != nil {
				t.Errorf("a rejected answer must return the zero Decision, got %+v", got)
			}
			if errors.Is(err, ErrInvalidProposal) && err.Error() == ErrInvalidProposal.Error() {
				t.Errorf("invalid decisions should say why, got bare %q", err)
			}
		})
	}
}

func TestParseProposalDepthWithinLimit(t *testing.T) {
	n := MaxProposalDepth - 4
	args := `{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	text := `{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":` + args + `},"confidence":0.9}`
	d, err := ParseProposal(text)
	if err != nil {
		t.Fatalf("nesting below the limit was refused: %v", err)
	}
	if string(d.Arguments) != args {
		t.Errorf("arguments changed: %s", d.Arguments)
	}
}
