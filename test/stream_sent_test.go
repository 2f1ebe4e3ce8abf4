package test

// An error event toolgate writes into a stream follows what the client
// was actually sent, which only the pipeline knows: in shadow mode every
// event goes out at once, calls included, so an error after a cut must
// continue the client's sequence numbers and its JSON array.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/proxy/sse"
)

func TestResponsesShadowStreamCutNumbersAfterWhatWentOut(t *testing.T) {
	evs := sseEvents(t, "..", "proxy", "responses", "testdata", "function_call_stream.sse")
	// created, in_progress, the call's output_item.added and its first
	// deltas; then the body ends without response.completed.
	u := newFaultQueue(t, fuSSE(evs[:6], 0))
	g := fuGate(t, u, "", "mode: shadow\n")
	body := []byte(`{"model":"gpt-4o","input":"What's the weather like in Boston today?","stream":true,` +
		`"tools":[{"type":"function","name":"get_current_weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}]}`)
	r := fuPost(t, g.URL, "/v1/responses", body)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if !strings.HasPrefix(string(r.Body), strings.Join(evs[:6], "")) {
		t.Fatalf("shadow mode changed what went out:\n%s", r.Body)
	}
	var types []string
	rd := sse.NewReader(strings.NewReader(string(r.Body)), 0)
	for i := 0; rd.Next(); i++ {
		var e struct {
			Type string `json:"type"`
			Seq  *int   `json:"sequence_number"`
		}
		seq := -1
		if err := json.Unmarshal(rd.Event().Data, &e); err == nil && e.Seq != nil {
			seq = *e.Seq
		}
		if seq != i {
			t.Errorf("event %d (%s) numbered %d, want %d: the error repeats a number the client got", i, e.Type, seq, i)
		}
		types = append(types, e.Type)
	}
	if len(types) != 7 || types[6] != "error" {
		t.Errorf("events %v, want the six sent and an error", types)
	}
}

func TestGeminiArrayShadowStreamCutStaysOneArray(t *testing.T) {
	call := `{"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_current_weather","args": {"location": "Boston, MA"}}}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash"}`
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"What's the weather like in Boston today?"}]}],` +
		`"tools":[{"functionDeclarations":[{"name":"get_current_weather","parameters":{"type":"OBJECT","properties":{"location":{"type":"STRING"}},"required":["location"]}}]}]}`)
	// The array opens with the call and ends before its closing bracket.
	u := newFaultQueue(t, fuBytes(http.StatusOK, "application/json; charset=UTF-8", []byte("["+call)))
	g := fuGate(t, u, "", "mode: shadow\n")
	r := fuPost(t, g.URL, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", body, "x-goog-api-key", "k")
	if r.Status != http.StatusOK || !strings.HasPrefix(string(r.Body), "["+call) {
		t.Fatalf("status %d, client read %q", r.Status, r.Body)
	}
	var elems []map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &elems); err != nil || len(elems) != 2 || elems[1]["error"] == nil {
		t.Fatalf("client read %q (%v), want the call and an error in one array", r.Body, err)
	}
}
