package test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The abstain exit through each official SDK, plain and streamed: the exit
// is offered last in the upstream request's tools, in the API's own tool
// shape, and a call to it reaches the client as the reason, as text, with
// no call, in one upstream request.

const (
	abstainOn     = "abstain:\n  enabled: true\n"
	abstainReason = "None of my tools can book a restaurant."
)

var abstainArgs = `{"reason":"` + abstainReason + `"}`

func TestAbstainAnthropic(t *testing.T) {
	anthModes(t, func(t *testing.T, stream bool) {
		up := newAnthUpstream(t, func(n int, r *anthRequest) anthReply {
			return anthAnswer(t, r, anthMsg("msg_exit", "tool_use", anthToolUse("toolu_exit", abstainName, abstainArgs)))
		})
		msg, h, err := anthCall(t, anthGate(t, anthConfig(up, abstainOn)), anthParams(), stream)
		if err != nil {
			t.Fatal(err)
		}
		reqs := up.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d upstream requests, want 1", len(reqs))
		}
		var tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		reqs[0].field(t, "tools", &tools)
		if n := len(tools); n != 3 || tools[n-1].Name != abstainName || tools[n-1].Description == "" || !strings.Contains(string(tools[n-1].InputSchema), `"reason"`) {
			t.Fatalf("the exit is not the last tool of the upstream request: %s", reqs[0].Body)
		}
		if len(anthToolUses(t, msg)) != 0 || len(msg.Content) != 1 || msg.Content[0].Text != abstainReason || msg.StopReason != "end_turn" {
			t.Fatalf("message %s", msg.RawJSON())
		}
		if !stream && h.Get("X-Toolgate-Outcome") != "abstained" {
			t.Errorf("outcome %q", h.Get("X-Toolgate-Outcome"))
		}
	})
}

func TestAbstainChatStream(t *testing.T) {
	up := csStartUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		csWrite(w, fuChunk(`{"role":"assistant","content":null,"refusal":null}`, "")+csCall("call_exit", abstainName, abstainArgs))
	}, "")
	acc, err := csRun(t, csClient(t, csStartGate(t, up.srv.URL, abstainOn)))
	if err != nil {
		t.Fatal(err)
	}
	reqs := up.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests, want 1", len(reqs))
	}
	if names := chatToolNames(reqs[0]); len(names) == 0 || names[len(names)-1] != abstainName {
		t.Fatalf("the exit is not the last tool of the upstream request: %s", reqs[0])
	}
	msg := acc.Choices[0].Message
	if len(msg.ToolCalls) != 0 || msg.Content != abstainReason || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("message %+v finish %q", msg, acc.Choices[0].FinishReason)
	}
}

func TestAbstainResponses(t *testing.T) {
	respModes(t, func(t *testing.T, stream bool) {
		m, c := respSetup(t, abstainOn, func(n int, r *respReq) respAnswer {
			return respAnswer{ID: "resp_exit", Items: []string{respCall("fc_exit", "call_exit", abstainName, abstainArgs)}}
		})
		out, _, hr, err := respRun(t, c, respParams("Book a table for two tonight."), stream)
		if err != nil {
			t.Fatal(err)
		}
		reqs := m.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d upstream requests, want 1", len(reqs))
		}
		var tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		_ = json.Unmarshal([]byte(reqs[0].field("tools")), &tools)
		if n := len(tools); n != 3 || tools[n-1].Name != abstainName || tools[n-1].Type != "function" {
			t.Fatalf("the exit is not the last tool of the upstream request: %s", reqs[0].Body)
		}
		if len(out.Output) != 1 {
			t.Fatalf("output %s", out.Output)
		}
		it := out.item(t, 0)
		if it.Type != "message" || len(it.Content) != 1 || it.Content[0].Text != abstainReason {
			t.Fatalf("output item %s", out.Output[0])
		}
		if !stream {
			respHeader(t, hr, "X-Toolgate-Outcome", "abstained")
		}
	})
}

// chatToolNames are the function names of a Chat Completions request's
// tools, in order; nil if the body cannot be read.
func chatToolNames(body []byte) []string {
	var sent struct {
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if json.Unmarshal(body, &sent) != nil {
		return nil
	}
	names := make([]string, len(sent.Tools))
	for i, tl := range sent.Tools {
		names[i] = tl.Function.Name
	}
	return names
}
