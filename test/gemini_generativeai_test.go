package test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestGeminiGenerativeAIStreamEscalation: @google/generative-ai 0.24.1
// (what LangChain's Gemini model runs on) reads a stream whose text went
// out before toolgate escalated the call. The package drops an error
// element, so the app must see the escalation as the model's text, naming
// it, or as an error.
func TestGeminiGenerativeAIStreamEscalation(t *testing.T) {
	node := needNodeIn(t, "node-gemini", "@google/generative-ai")
	escalate := gemAnswer("STOP", gemText(gemDecision("escalate", "", "", 0.2)))
	up := newGemUpstream(t, func(n int, _ *gemRequest) gemReply {
		if n == 1 {
			return gemReply{Chunks: []string{gemAnswer("", gemText("Let me check that. ")),
				gemAnswer("STOP", gemFC("database_query", `{"sql":"SELECT 1"}`, "c2lnLWRi"))}}
		}
		return gemReply{Chunks: []string{escalate}}
	})
	g := gemGate(t, up, "")
	out := strings.TrimSpace(string(runNodeIn(t, node, "node-gemini", "generative_ai.mjs", 60*time.Second, "TOOLGATE_BASE_URL="+g.URL)))
	t.Logf("@google/generative-ai: %s", out)
	var got struct {
		Text      string  `json:"text"`
		FinalText *string `json:"final_text"`
		Error     *string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("result %q: %v", out, err)
	}
	recs := g.Sink.records()
	if len(recs) != 1 {
		t.Fatalf("%d sink records, want 1", len(recs))
	}
	tag := "[toolgate:" + recs[0].Escalation.ID + "]"
	seen := strings.Contains(got.Text, tag) || (got.Error != nil && strings.Contains(*got.Error, recs[0].Escalation.ID))
	if !seen {
		t.Fatalf("the app did not see escalation %s: %s", recs[0].Escalation.ID, out)
	}
	if !strings.HasPrefix(got.Text, "Let me check that. ") {
		t.Errorf("the text before the escalation: %q", got.Text)
	}
	if got.FinalText != nil && !strings.Contains(*got.FinalText, tag) {
		t.Errorf("the aggregated answer %q does not name the escalation", *got.FinalText)
	}
}
