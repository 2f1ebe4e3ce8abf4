package recovery

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func FuzzParseProposal(f *testing.F) {
	for _, s := range []string{
		sampleSubstitute,
		sampleEscalate,
		"```json\n" + sampleSubstitute + "\n```",
		"prose {not json} " + sampleEscalate,
		`{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":"{\"a\":1}"},"confidence":1}`,
		`{"decision":"escalate","escalation":{"reason":"\"}{\\"},"confidence":0}`,
		`{"decision":"substitute","corrected_tool_call":{"tool_name":"t","arguments":[]},"confidence":0.5}`,
		`{"decision":"escalate","decision":"substitute"}`,
		`{"confidence":1e999}`,
		`{"a":[[[[[[[[[[]]]]]]]]]]}`,
		"{",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		d, err := ParseProposal(text)
		if err != nil {
			if !errors.Is(err, ErrNoJSON) && !errors.Is(err, ErrInvalidProposal) {
				t.Fatalf("error %v is neither ErrNoJSON nor ErrInvalidProposal", err)
			}
			return
		}
		if math.IsNaN(d.Confidence) || d.Confidence < 0 || d.Confidence > 1 {
			t.Fatalf("accepted confidence %v", d.Confidence)
		}
		switch d.Decision {
		case DecisionSubstitute:
			if strings.TrimSpace(d.Tool) == "" {
				t.Fatal("accepted a substitution without a tool name")
			}
			if !json.Valid(d.Arguments) || len(d.Arguments) == 0 || d.Arguments[0] != '{' {
				t.Fatalf("accepted substitution arguments that are not a JSON object: %q", d.Arguments)
			}
			var m map[string]any
			if err := json.Unmarshal(d.Arguments, &m); err != nil || m == nil {
				t.Fatalf("substitution arguments do not decode as an object: %v", err)
			}
		case DecisionEscalate:
			if strings.TrimSpace(d.Reason) == "" {
				t.Fatal("accepted an escalation without a reason")
			}
			if d.Tool != "" || d.Arguments != nil {
				t.Fatal("an escalation carries a corrected call")
			}
		default:
			t.Fatalf("accepted decision %q", d.Decision)
		}
	})
}

func FuzzFillPrompt(f *testing.F) {
	f.Add("database_query", `{"sql":"select 1"}`, "unknown tool", "search_docs", "Search the docs.", `{"type":"object"}`, 0.8)
	f.Add("[AVAILABLE_TOOLS_CATALOG]", "[CONFIDENCE_THRESHOLD]", "[ERROR_MESSAGE]", "[HALLUCINATED_TOOL_NAME]", "```", "[", 0.5)
	f.Add("```\n```data", "\n[]\n", "````", "t`", "<b>&amp;</b>", `{"description":"[AVAILABLE_TOOLS_CATALOG]"}`, math.NaN())
	f.Add("", "", "", "", "", "", math.Inf(1))
	f.Fuzz(func(t *testing.T, name, args, errMsg, toolName, toolDesc, params string, threshold float64) {
		in := PromptInput{
			ToolName:     name,
			Arguments:    args,
			ErrorMessage: errMsg,
			Tools: []PromptTool{
				{Name: toolName, Description: toolDesc, Parameters: json.RawMessage(params)},
				{Name: name, Description: args},
			},
			Threshold: threshold,
		}
		out := FillPrompt(DefaultPrompt, in)

		catalog := fenceAsData(renderPromptCatalog(in.Tools))
		if n := strings.Count(out, catalog); n != 1 {
			t.Fatalf("catalog rendered %d times, want exactly 1", n)
		}
		var listed []map[string]json.RawMessage
		body := strings.Split(catalog, "\n")[1]
		if err := json.Unmarshal([]byte(body), &listed); err != nil || len(listed) != len(in.Tools) {
			t.Fatalf("catalog is not a JSON array of %d tools: %v", len(in.Tools), err)
		}

		// The template's own wording must survive intact and in order: no
		// inserted value may swallow or rewrite the text around it.
		rest := out
		for _, part := range splitOnPlaceholders(DefaultPrompt) {
			i := strings.Index(rest, part)
			if i < 0 {
				t.Fatalf("template text %q missing or out of order", part)
			}
			rest = rest[i+len(part):]
		}
	})
}

// splitOnPlaceholders returns the fixed text between placeholders.
func splitOnPlaceholders(tmpl string) []string {
	parts := []string{tmpl}
	for _, p := range []string{PlaceholderToolName, PlaceholderArguments, PlaceholderError, PlaceholderCatalog, PlaceholderThreshold} {
		var next []string
		for _, s := range parts {
			next = append(next, strings.Split(s, p)...)
		}
		parts = next
	}
	return parts
}
