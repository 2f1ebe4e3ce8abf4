package test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLangChainEscalationWithDefaultRetries runs LangChain's ChatOpenAI, its
// retries as they come, against a model that always answers with a call
// that fails its schema. LangChain retries the 422; the retry is answered
// from memory with the same escalation, as a 409 it does not retry: the
// app gets the error within seconds, and the model was asked twice in all
// (the answer and one reprompt), with one sink record.
func TestLangChainEscalationWithDefaultRetries(t *testing.T) {
	node := needNode(t, "@langchain/openai", "@langchain/core")
	m := newMockFunc(t, func(int, *mockRequest) mockReply { return callsAnswer("chatcmpl-lc-bad", badUnit) })
	g := weatherGate(t, m, replayOn)

	out := strings.TrimSpace(string(runNode(t, node, "langchain_escalation.mjs", 60*time.Second, "TOOLGATE_BASE_URL="+g.URL,
		"LANGSMITH_TRACING=false", "LANGCHAIN_TRACING_V2=false", "LANGCHAIN_TRACING=false")))
	t.Logf("LangChain: %s", out)
	var got struct {
		OK           bool   `json:"ok"`
		Status       int    `json:"status"`
		EscalationID string `json:"escalation_id"`
		ElapsedMS    int64  `json:"elapsed_ms"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("result %q: %v", out, err)
	}
	if got.OK {
		t.Fatal("the app got an answer, want the escalation")
	}
	recs := g.Sink.records()
	if len(recs) != 1 {
		t.Fatalf("%d sink records, want 1", len(recs))
	}
	if got.EscalationID != recs[0].Escalation.ID {
		t.Errorf("the app's error names escalation %q, the sink %q", got.EscalationID, recs[0].Escalation.ID)
	}
	if got.Status != http.StatusConflict {
		t.Errorf("status %d, want the replay's 409", got.Status)
	}
	// LangChain waits 1–2 s before its first retry.
	if got.ElapsedMS > 5000 {
		t.Errorf("the error reached the app after %d ms", got.ElapsedMS)
	}
	if n := m.count(); n > 2 {
		t.Errorf("the model was asked %d times, want at most 2", n)
	}
}
