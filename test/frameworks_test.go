package test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The agent frameworks of test/node-frameworks each run their own tool loop
// through toolgate, by base URL alone, with a local function as the tool.
// Per framework, API and streaming mode, these answers are scripted: a call
// to an invented tool (repaired onto the real one), a call with bad
// arguments (reprompted), a call nothing repairs (escalated; in a stream
// also after text), and a call to the abstain exit. Every
// framework's default retries stay on; the scripted upstream counts the
// requests, so a retried escalation shows as a third one. With the abstain
// exit on, a call to it ends the loop with the reason as the answer.

const (
	fwInventedArgs = `{"city":"Boston"}`
	fwBadArgs      = `{"location":"Boston, MA","unit":"kelvin"}`
	fwAnswer       = "It is 22 degrees in Boston."
)

// fwCase is one framework run; the exported fields go to the Node script.
type fwCase struct {
	ID        string `json:"id"`
	Framework string `json:"framework"`
	API       string `json:"api"`
	Stream    bool   `json:"stream"`
	Base      string `json:"base"`

	scenario string
	gate     *gate
	// bodies returns the bodies the scripted upstream received.
	bodies func() [][]byte
}

// fwResult is the line the Node script prints for a case.
type fwResult struct {
	ID   string `json:"id"`
	Runs []struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	} `json:"runs"`
	Text  *string `json:"text"`
	Error *struct {
		Class        string `json:"class"`
		Status       int    `json:"status"`
		Retryable    *bool  `json:"retryable"`
		EscalationID string `json:"escalation_id"`
		Where        string `json:"where"`
		Stage        string `json:"stage"`
		Message      string `json:"message"`
	} `json:"error"`
}

var fwScenarios = []string{"invented", "bad_arguments", "escalated", "escalated_after_text", "abstained"}

// fwLead is the text the model says before its call in the
// escalated_after_text scenario: in a stream it has reached the app by the
// time the call is judged, so the escalation can only come inside the
// stream.
const fwLead = "Let me check."

// fwFirstCall is the model's first answer in a scenario: id, name, args.
func fwFirstCall(scenario string) (string, string, string) {
	if scenario == "bad_arguments" {
		return "call_bad1", "get_current_weather", fwBadArgs
	}
	return "call_inv1", "fetch_weather_report", fwInventedArgs
}

// fwStep is what the scripted model answers to request n of a scenario:
// a call, a re-query's answer (a decision text or the fixed call), or the
// final text once the tool result came back.
type fwStep struct {
	callID, name, args string
	// text is the whole answer, or with a call the text before it.
	text string
}

func fwScript(t *testing.T, scenario string, n int) (fwStep, bool) {
	id, name, args := fwFirstCall(scenario)
	switch {
	case n == 1 && scenario == "abstained":
		return fwStep{callID: "call_exit1", name: abstainName, args: abstainArgs}, true
	case n == 1 && scenario == "escalated_after_text":
		return fwStep{text: fwLead, callID: id, name: name, args: args}, true
	case n == 1:
		return fwStep{callID: id, name: name, args: args}, true
	case n == 2 && scenario == "invented":
		return fwStep{text: anthDecision("substitute", "get_current_weather", weatherArgs, 0.9)}, true
	case n == 2 && scenario == "bad_arguments":
		return fwStep{callID: "call_fix1", name: "get_current_weather", args: weatherArgs}, true
	case n == 2 && strings.HasPrefix(scenario, "escalated"):
		return fwStep{text: anthDecision("escalate", "", "", 0.2)}, true
	case n == 3 && !strings.HasPrefix(scenario, "escalated"):
		return fwStep{text: fwAnswer}, true
	}
	t.Errorf("%s: unexpected upstream request %d", scenario, n)
	return fwStep{}, false
}

// fwStreamed reports whether a request body asks for a stream.
func fwStreamed(body []byte) bool {
	var head struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &head)
	return head.Stream
}

// fwChatUpstream scripts Chat Completions; a streamed answer opens with a
// role-only chunk, as OpenAI sends it.
func fwChatUpstream(t *testing.T, scenario string) (string, func() [][]byte) {
	m := newMockFunc(t, func(n int, r *mockRequest) mockReply {
		st, ok := fwScript(t, scenario, n)
		if !ok {
			return mockReply{Status: http.StatusInternalServerError, Body: openAIError("no scripted reply", "server_error", "", "")}
		}
		if !fwStreamed(r.Body) {
			if st.callID == "" {
				return textAnswer(fmt.Sprintf("chatcmpl-fw%d", n), st.text)
			}
			return callsAnswer(fmt.Sprintf("chatcmpl-fw%d", n), call{st.callID, st.name, st.args})
		}
		var evs []string
		switch {
		case st.callID == "":
			evs = fuConcat(fuTextEvents(st.text), []string{fuChunk(`{}`, "stop"), "data: [DONE]\n\n"})
		case st.text != "":
			evs = fuConcat(fuTextEvents(st.text), fuCallEvents(st.callID, st.name, st.args))
		default:
			evs = fuConcat([]string{fuChunk(`{"role":"assistant","content":null,"refusal":null}`, "")}, fuCallEvents(st.callID, st.name, st.args))
		}
		return mockReply{Body: strings.Join(evs, ""), Header: map[string]string{"Content-Type": "text/event-stream"}}
	})
	return m.URL(), fwBodies(m.requests, func(r mockRequest) []byte { return r.Body })
}

// fwBodies reads the bodies of the requests a scripted upstream received.
func fwBodies[R any](requests func() []R, body func(R) []byte) func() [][]byte {
	return func() [][]byte {
		var out [][]byte
		for _, r := range requests() {
			out = append(out, body(r))
		}
		return out
	}
}

// fwResponsesUpstream scripts the Responses API, which streams by itself
// when asked.
func fwResponsesUpstream(t *testing.T, scenario string) (string, func() [][]byte) {
	m := newRespMock(t, func(n int, r *respReq) respAnswer {
		st, ok := fwScript(t, scenario, n)
		if n == 2 && scenario == "invented" {
			// Stored by default, so an invented tool is corrected by the
			// model itself (docs/apis.md): it calls the real tool.
			st = fwStep{callID: "call_fix1", name: "get_current_weather", args: weatherArgs}
		}
		id := fmt.Sprintf("resp_fw%d", n)
		switch {
		case !ok:
			return respAnswer{ID: id, Status: http.StatusInternalServerError, Error: openAIError("no scripted reply", "server_error", "", "")}
		case st.callID == "":
			return respAnswer{ID: id, Items: []string{respMessage(fmt.Sprintf("msg_fw%d", n), st.text)}}
		case st.text != "":
			return respAnswer{ID: id, Items: []string{respMessage(fmt.Sprintf("msg_fw%d", n), st.text),
				respCall(fmt.Sprintf("fc_fw%d", n), st.callID, st.name, st.args)}}
		}
		return respAnswer{ID: id, Items: []string{respCall(fmt.Sprintf("fc_fw%d", n), st.callID, st.name, st.args)}}
	})
	return m.srv.URL, fwBodies(m.requests, func(r *respReq) []byte { return r.Body })
}

// fwMessagesUpstream scripts the Messages API; anthAnswer streams when the
// request asks.
func fwMessagesUpstream(t *testing.T, scenario string) (string, func() [][]byte) {
	u := newAnthUpstream(t, func(n int, r *anthRequest) anthReply {
		st, ok := fwScript(t, scenario, n)
		id := fmt.Sprintf("msg_fw%d", n)
		switch {
		case !ok:
			return anthReply{Status: http.StatusInternalServerError, JSON: anthError("api_error", "no scripted reply")}
		case st.callID == "":
			return anthAnswer(t, r, anthMsg(id, "end_turn", anthText(st.text)))
		}
		use := anthToolUse(strings.Replace(st.callID, "call_", "toolu_", 1), st.name, st.args)
		if st.text != "" {
			return anthAnswer(t, r, anthMsg(id, "tool_use", anthText(st.text), use))
		}
		return anthAnswer(t, r, anthMsg(id, "tool_use", use))
	})
	return u.srv.URL, fwBodies(u.requests, func(r *anthRequest) []byte { return r.Body })
}

// fwCases builds a case, its scripted upstream and its toolgate for every
// API, streaming mode and scenario.
func fwCases(t *testing.T, framework string, apis ...string) []*fwCase {
	return fwCasesWith(t, framework, "", apis...)
}

// fwCasesWith is fwCases with config added to every case's toolgate.
func fwCasesWith(t *testing.T, framework, config string, apis ...string) []*fwCase {
	var out []*fwCase
	for _, api := range apis {
		for _, stream := range []bool{false, true} {
			for _, sc := range fwScenarios {
				if sc == "escalated_after_text" && !stream {
					// Text and call come in one body: the same as escalated.
					continue
				}
				c := &fwCase{ID: fmt.Sprintf("%s/%s/stream=%v/%s", framework, api, stream, sc), Framework: framework, API: api, Stream: stream, scenario: sc}
				var url string
				switch api {
				case "chat":
					url, c.bodies = fwChatUpstream(t, sc)
				case "responses":
					url, c.bodies = fwResponsesUpstream(t, sc)
				case "messages":
					url, c.bodies = fwMessagesUpstream(t, sc)
				}
				extra := config
				if sc == "abstained" {
					extra += abstainOn
				}
				c.gate = startGate(t, "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: mock\n    url: "+url+"\n"+extra)
				c.Base = c.gate.URL
				out = append(out, c)
			}
		}
	}
	return out
}

// runFrameworkCases runs every case in one Node process and checks each.
func runFrameworkCases(t *testing.T, node string, cases []*fwCase) {
	t.Helper()
	spec, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	stdout := runNodeIn(t, node, "node-frameworks", "run.mjs", 3*time.Minute, "TOOLGATE_CASES="+string(spec),
		"OPENAI_AGENTS_DISABLE_TRACING=1")
	results := map[string]fwResult{}
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r fwResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("result line %s: %v", sc.Bytes(), err)
		}
		results[r.ID] = r
	}
	for _, c := range cases {
		t.Run(c.ID, func(t *testing.T) {
			r, ok := results[c.ID]
			if !ok {
				t.Fatalf("no result line; the script printed:\n%s", stdout)
			}
			checkFrameworkCase(t, c, r)
		})
	}
}

func checkFrameworkCase(t *testing.T, c *fwCase, r fwResult) {
	t.Helper()
	bodies := c.bodies()
	line, _ := json.Marshal(r)
	if strings.HasPrefix(c.scenario, "escalated") {
		checkFrameworkEscalation(t, c, r, len(bodies))
		return
	}
	if c.scenario == "abstained" {
		// The exit reaches the app as the model's last word, the reason.
		if r.Error != nil || len(r.Runs) != 0 || r.Text == nil || *r.Text != abstainReason || len(bodies) != 1 {
			t.Errorf("the app got %s after %d upstream requests, want the text %q after 1", line, len(bodies), abstainReason)
		}
		return
	}
	if r.Error != nil {
		t.Fatalf("the app caught an error: %s", line)
	}
	if len(r.Runs) != 1 || r.Runs[0].Tool != "get_current_weather" || !sameJSON(string(r.Runs[0].Args), weatherArgs) {
		t.Errorf("tool runs %s, want get_current_weather once with %s", line, weatherArgs)
	}
	if r.Text == nil || *r.Text != fwAnswer {
		t.Errorf("final text: %s", line)
	}
	if len(bodies) != 3 {
		t.Fatalf("%d upstream requests, want 3 (the answer, one re-query, the turn with the tool result)", len(bodies))
	}
	// The framework's own next turn replays the repaired call, under the
	// model's call id, and answers it with the tool's result.
	id, name, args := fwFirstCall(c.scenario)
	switch {
	case c.API == "messages":
		id = strings.Replace(id, "call_", "toolu_", 1)
	case c.API == "responses" && (c.scenario == "bad_arguments" || c.scenario == "invented"):
		// Stored by default: the repaired call carries the ids of the
		// re-query's stored answer, which holds it (docs/apis.md).
		id = "call_fix1"
	}
	last := bodies[2]
	if !bytes.Contains(last, []byte(id)) || !bytes.Contains(last, []byte("22")) {
		t.Errorf("the tool result for %s is not in the next turn: %s", id, last)
	}
	bad := name
	if c.scenario == "bad_arguments" {
		bad = "kelvin"
	}
	if bytes.Contains(last, []byte(bad)) {
		t.Errorf("the model's broken call (%s %s) reached the framework's history: %s", name, args, last)
	}
}

// checkFrameworkEscalation checks that the app caught the one escalation,
// with its id, without running a tool or asking again. Before any byte it
// is a plain 422; after text, an error inside the stream, which carries no
// HTTP status.
func checkFrameworkEscalation(t *testing.T, c *fwCase, r fwResult, requests int) {
	t.Helper()
	line, _ := json.Marshal(r)
	recs := c.gate.Sink.records()
	switch {
	case r.Error == nil:
		t.Fatalf("the app got no error: %s", line)
	case len(r.Runs) != 0:
		t.Errorf("a tool ran: %s", line)
	case len(recs) != 1:
		t.Fatalf("%d escalations recorded, want 1 (a retried escalation is a second one); app saw %s", len(recs), line)
	case r.Error.EscalationID != recs[0].Escalation.ID:
		t.Errorf("the app caught %s, want escalation id %s", line, recs[0].Escalation.ID)
	case c.scenario == "escalated" && r.Error.Status != http.StatusUnprocessableEntity:
		t.Errorf("the app caught %s, want a plain 422", line)
	case c.scenario == "escalated" && r.Error.Retryable != nil && *r.Error.Retryable:
		t.Errorf("the framework counts the escalation as retryable: %s", line)
	}
	want := 2
	if c.API == "responses" && c.scenario == "escalated_after_text" && c.Stream {
		// The stored answer's id went out with the text: a repair would
		// leave the app continuing from the stored bad call, so toolgate
		// escalates without a recovery re-query (docs/apis.md).
		want = 1
	}
	if requests != want {
		t.Errorf("%d upstream requests, want %d (the answer and any recovery re-query; no retry)", requests, want)
	}
	retryable := "-"
	if r.Error.Retryable != nil {
		retryable = fmt.Sprint(*r.Error.Retryable)
	}
	t.Logf("escalation as the app caught it: class %s, status %d, retryable %s, id at %s, thrown by %q", r.Error.Class, r.Error.Status, retryable, r.Error.Where, r.Error.Stage)
}

// TestFrameworkOpenAIAgents runs the OpenAI Agents SDK on its Chat
// Completions and Responses models, plain and streamed.
func TestFrameworkOpenAIAgents(t *testing.T) {
	node := needNodeIn(t, "node-frameworks", "@openai/agents", "openai", "zod")
	runFrameworkCases(t, node, fwCases(t, "agents", "chat", "responses"))
}

// TestFrameworkOpenAIAgentsUnderStrict: the Agents SDK marks its tools
// strict itself, so with catalog.strict auto toolgate leaves every tool as
// the SDK sent it, and every scenario ends as it does without.
func TestFrameworkOpenAIAgentsUnderStrict(t *testing.T) {
	node := needNodeIn(t, "node-frameworks", "@openai/agents", "openai", "zod")
	cases := fwCasesWith(t, "agents", "catalog:\n  strict: auto\n", "chat", "responses")
	runFrameworkCases(t, node, cases)
	for _, c := range cases {
		for _, api := range []string{"chat", "responses"} {
			m := c.gate.App.Metrics.StrictTools
			if n := testutil.ToFloat64(m.WithLabelValues(api, "marked")); n != 0 {
				t.Errorf("%s: toolgate marked %v tools the SDK had decided", c.ID, n)
			}
			if n := testutil.ToFloat64(m.WithLabelValues(api, "client")); api == c.API && n == 0 {
				t.Errorf("%s: no tool counted as the client's", c.ID)
			}
		}
	}
}

// TestFrameworkAISDK runs the AI SDK's generateText and streamText with a
// multi-step stop on @ai-sdk/openai (chat, responses) and @ai-sdk/anthropic.
func TestFrameworkAISDK(t *testing.T) {
	node := needNodeIn(t, "node-frameworks", "ai", "@ai-sdk/openai", "@ai-sdk/anthropic", "zod")
	runFrameworkCases(t, node, fwCases(t, "aisdk", "chat", "responses", "messages"))
}

// TestFrameworkAnthropicSDK runs @anthropic-ai/sdk with a hand-written tool
// loop on messages.create and messages.stream.
func TestFrameworkAnthropicSDK(t *testing.T) {
	node := needNodeIn(t, "node-frameworks", "@anthropic-ai/sdk")
	runFrameworkCases(t, node, fwCases(t, "anthropic", "messages"))
}
