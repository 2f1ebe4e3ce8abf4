package validate

import (
	"strings"
	"testing"
)

// Each constructor makes its code's finding, with a message safe for logs
// (no argument values) and a detail for the model.
func TestFindingConstructors(t *testing.T) {
	for _, c := range []struct {
		f            Finding
		code         Code
		msg, detail  string
		notInMessage string
	}{
		{Unknown("get_wether"), UnknownTool, "the tool does not exist", `no tool named "get_wether" exists`, "get_wether"},
		{NotOffered("refund"), ToolNotOffered, "the tool was not offered in this request", `the tool "refund" is not available in this request`, "refund"},
		{NotInCatalog("rm"), ToolNotInCatalog, "the tool is not in the configured catalog", `the tool "rm" is not an approved tool`, "rm"},
		{Malformed("m", "d"), MalformedArguments, "m", "d", ""},
		{SchemaError("/a", "type", "m", "d"), SchemaViolation, "m", "d", ""},
		{RuleBroken("", "rule", "m", "d"), RuleViolation, "m", "d", ""},
		{Unverifiable("/id"), ProvenanceUnverifiable, "arguments/id: the conversation history is not in the request", "arguments/id: the conversation history is not in the request", ""},
		{Unvouched("/id", "ord_991"), Provenance, "arguments/id: the value did not appear in user content or a tool result",
			`arguments/id: the value "ord_991" did not appear in anything the user wrote or a tool returned; use a value from the conversation or ask the user`, "ord_991"},
		{NeedsConfirmation(""), ConfirmationRequired, "the tool requires confirmation by a person", "the tool requires confirmation by a person", ""},
		{NeedsConfirmation("refunds over 100"), ConfirmationRequired, "the tool requires confirmation by a person", "refunds over 100", "100"},
		{TruncatedCall(), Truncated, "the answer was cut off by the token limit", "the answer was cut off by the token limit", ""},
	} {
		if c.f.Code != c.code || c.f.Message != c.msg || c.f.Detail != c.detail {
			t.Errorf("%s: got %+v", c.code, c.f)
		}
		if c.notInMessage != "" && strings.Contains(c.f.Message, c.notInMessage) {
			t.Errorf("%s: the message %q quotes %q", c.code, c.f.Message, c.notInMessage)
		}
	}
	f := SchemaError("/a", "type", "m", "d")
	if f.Pointer != "/a" || f.Keyword != "type" {
		t.Errorf("SchemaError lost where: %+v", f)
	}
	if r := RuleBroken("/x", "validator:v", "m", "d").WithReason("over budget"); r.Reason != "over budget" || r.Pointer != "/x" || r.Keyword != "validator:v" {
		t.Errorf("RuleBroken.WithReason: %+v", r)
	}
}
