package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/cmd/toolgate/app"
)

// respStartGate starts toolgate in front of upstream with an empty catalog
// (the request's own tools are the catalog) and returns its base URL.
func respStartGate(t *testing.T, upstream, extra string) string {
	t.Helper()
	dir := t.TempDir()
	yaml := fmt.Sprintf("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: openai\n    url: %s\n%s", upstream, extra)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := catalog.Parse([]byte(yaml), path)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	snap, err := catalog.Compile(cfg, dir)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	a, err := app.StartSnapshot(snap, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	return "http://" + a.ProxyAddr()
}

// respClient is the official openai-go client pointed at toolgate.
func respClient(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

// respSetup starts a scripted upstream and toolgate in front of it.
func respSetup(t *testing.T, extra string, script func(n int, r *respReq) respAnswer) (*respMock, openai.Client) {
	t.Helper()
	m := newRespMock(t, script)
	return m, respClient(respStartGate(t, m.srv.URL, extra))
}

// respParams asks about the weather and a stock price, offering two
// function tools.
func respParams(input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: "gpt-5",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
		Tools: []responses.ToolUnionParam{
			{OfFunction: &responses.FunctionToolParam{
				Name:        "get_weather",
				Description: openai.String("Get the current weather in a given location"),
				Parameters: map[string]any{"type": "object", "properties": map[string]any{
					"location": map[string]any{"type": "string"},
					"unit":     map[string]any{"type": "string", "enum": []string{"celsius", "fahrenheit"}},
				}, "required": []string{"location"}},
				Strict: openai.Bool(false),
			}},
			{OfFunction: &responses.FunctionToolParam{
				Name:        "get_stock_price",
				Description: openai.String("Fetch the latest price for a given ticker"),
				Parameters: map[string]any{"type": "object", "properties": map[string]any{
					"ticker":   map[string]any{"type": "string"},
					"exchange": map[string]any{"type": "string"},
				}, "required": []string{"ticker", "exchange"}},
				Strict: openai.Bool(false),
			}},
		},
	}
}

// respOutput is what a test reads of an answer: its id and output items.
type respOutput struct {
	ID         string            `json:"id"`
	Status     string            `json:"status"`
	Output     []json.RawMessage `json:"output"`
	Escalation json.RawMessage   `json:"toolgate_escalation"`
}

// respItem is one output item, decoded.
type respItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Text string `json:"text"`
	} `json:"content"`
}

func (o respOutput) item(t *testing.T, i int) respItem {
	t.Helper()
	if i >= len(o.Output) {
		t.Fatalf("output has %d items, want item %d", len(o.Output), i)
	}
	var it respItem
	if err := json.Unmarshal(o.Output[i], &it); err != nil {
		t.Fatal(err)
	}
	return it
}

// respRun sends params through the client, streamed or not, and returns
// what the client ends up with: the response (the terminal event's, for a
// stream), the raw events of a stream, the HTTP response, and the error.
func respRun(t *testing.T, c openai.Client, params responses.ResponseNewParams, stream bool) (respOutput, []string, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var hr *http.Response
	var out respOutput
	if !stream {
		resp, err := c.Responses.New(ctx, params, option.WithResponseInto(&hr))
		if err != nil {
			return out, nil, hr, err
		}
		if err := json.Unmarshal([]byte(resp.RawJSON()), &out); err != nil {
			t.Fatal(err)
		}
		return out, []string{resp.RawJSON()}, hr, nil
	}
	s := c.Responses.NewStreaming(ctx, params, option.WithResponseInto(&hr))
	var events []string
	for s.Next() {
		events = append(events, s.Current().RawJSON())
	}
	err := s.Err()
	if err == nil {
		out = respCheckStream(t, events)
	}
	return out, events, hr, err
}

// respCheckStream checks a stream as a client sees it: sequence numbers
// 0,1,2,… without a gap, deltas adding up to each call's arguments, and the
// terminal response's output equal to the items the stream finished. It
// returns the terminal response.
func respCheckStream(t *testing.T, events []string) respOutput {
	t.Helper()
	items := map[int]json.RawMessage{}
	args := map[int]string{}
	var final respOutput
	for i, raw := range events {
		var e struct {
			Type           string          `json:"type"`
			SequenceNumber int             `json:"sequence_number"`
			OutputIndex    int             `json:"output_index"`
			Delta          string          `json:"delta"`
			Arguments      string          `json:"arguments"`
			Item           json.RawMessage `json:"item"`
			Response       json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if e.SequenceNumber != i {
			t.Errorf("event %d (%s) has sequence_number %d", i, e.Type, e.SequenceNumber)
		}
		switch e.Type {
		case "response.function_call_arguments.delta":
			args[e.OutputIndex] += e.Delta
		case "response.function_call_arguments.done":
			if e.Arguments != args[e.OutputIndex] {
				t.Errorf("call %d: deltas %q, done %q", e.OutputIndex, args[e.OutputIndex], e.Arguments)
			}
		case "response.output_item.done":
			items[e.OutputIndex] = e.Item
		case "response.completed", "response.incomplete":
			if err := json.Unmarshal(e.Response, &final); err != nil {
				t.Fatal(err)
			}
			if i != len(events)-1 {
				t.Errorf("the terminal event is not the last")
			}
		}
	}
	if len(final.Output) != len(items) {
		t.Fatalf("the final output has %d items, the stream finished %d", len(final.Output), len(items))
	}
	for i, it := range final.Output {
		if !respSameJSON(it, items[i]) {
			t.Errorf("final item %d differs from the streamed one:\n%s\n%s", i, it, items[i])
		}
	}
	return final
}

func respSameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// respModes runs f for a plain and a streamed request.
func respModes(t *testing.T, f func(t *testing.T, stream bool)) {
	for _, stream := range []bool{false, true} {
		name := "plain"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) { f(t, stream) })
	}
}

func respHeader(t *testing.T, hr *http.Response, key, want string) {
	t.Helper()
	if hr == nil {
		t.Fatalf("no HTTP response")
	}
	if got := hr.Header.Get(key); got != want {
		t.Errorf("%s: %q, want %q", key, got, want)
	}
}

// respFindOutput returns the last tool output of a re-query's input.
func respFindOutput(r *respReq, callID string) string {
	for i := len(r.Input) - 1; i >= 0; i-- {
		var it struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
			Output string `json:"output"`
		}
		_ = json.Unmarshal(r.Input[i], &it)
		if it.Type == "function_call_output" && it.CallID == callID {
			return it.Output
		}
	}
	return ""
}

// respCheckRequery checks what every re-query must be: not streamed, and
// carrying no stream_options.
func respCheckRequery(t *testing.T, r *respReq) {
	t.Helper()
	if r.Stream || r.field("stream_options") != "" {
		t.Errorf("re-query #%d is streamed: %s", r.N, r.Body)
	}
}

const (
	respWeatherArgs = `{"location":"Boston, MA","unit":"celsius"}`
	respStockArgs   = `{"ticker":"AAPL","exchange":"NASDAQ"}`
)

func TestResponsesValidPassesUnchanged(t *testing.T) {
	respModes(t, func(t *testing.T, stream bool) {
		answer := respAnswer{ID: "resp_v1", Items: []string{respCall("fc_v1", "call_v1", "get_weather", respWeatherArgs)}}
		m, c := respSetup(t, "", func(int, *respReq) respAnswer { return answer })
		out, events, hr, err := respRun(t, c, respParams("Weather in Boston?"), stream)
		if err != nil {
			t.Fatal(err)
		}
		if stream {
			want := respEventsOf(respStreamOf(answer, ""))
			if strings.Join(events, "\n") != strings.Join(want, "\n") {
				t.Errorf("the stream was changed:\n%s", strings.Join(events, "\n"))
			}
		} else {
			if events[0] != respObject(answer, "completed", "", answer.Items) {
				t.Errorf("the body was changed:\n%s", events[0])
			}
			respHeader(t, hr, "X-Toolgate-Outcome", "pass")
			respHeader(t, hr, "X-Toolgate-Upstream-Calls", "1")
		}
		if it := out.item(t, 0); it.Name != "get_weather" || it.CallID != "call_v1" || out.ID != "resp_v1" {
			t.Errorf("call %+v", it)
		}
		if n := len(m.requests()); n != 1 {
			t.Errorf("%d upstream calls", n)
		}
	})
}

func TestResponsesParallelCalls(t *testing.T) {
	respModes(t, func(t *testing.T, stream bool) {
		answer := respAnswer{ID: "resp_p1", Items: []string{
			respCall("fc_p1", "call_p1", "get_weather", respWeatherArgs),
			respCall("fc_p2", "call_p2", "get_stock_price", respStockArgs)}}
		_, c := respSetup(t, "", func(int, *respReq) respAnswer { return answer })
		out, _, _, err := respRun(t, c, respParams("Weather in Boston and AAPL?"), stream)
		if err != nil {
			t.Fatal(err)
		}
		for i, raw := range out.Output {
			if !respSameJSON(raw, []byte(answer.Items[i])) {
				t.Errorf("item %d changed: %s", i, raw)
			}
		}
	})
}

// respDecision is the recovery answer of a model that picks a tool.
func respDecision(id, decision string) respAnswer {
	return respAnswer{ID: id, Items: []string{respMessage("msg_"+id, decision)}}
}

const respSubstitute = `{"decision":"substitute","corrected_tool_call":{"tool_name":"get_weather","arguments":{"location":"Boston, MA"}},"escalation":null,"confidence":0.93}`
const respEscalate = `{"decision":"escalate","corrected_tool_call":null,"escalation":{"reason":"no tool reads the order database","original_intent":"look up an order","missing_capability":"order database access"},"confidence":0.2}`

// With store: false nothing upstream keeps the answer, so a decision's
// substitute is released under the original ids.
func TestResponsesHallucinationSubstituted(t *testing.T) {
	respModes(t, func(t *testing.T, stream bool) {
		m, c := respSetup(t, "", func(n int, r *respReq) respAnswer {
			if n == 1 {
				return respAnswer{ID: "resp_s1", Items: []string{respCall("fc_s1", "call_s1", "weather_lookup", `{"location":"Boston, MA"}`)}}
			}
			respCheckRequery(t, r)
			if r.field("tool_choice") != `"none"` || !strings.Contains(respFindOutput(r, "call_s1"), "weather_lookup") {
				t.Errorf("the recovery re-query is not a decision request: %s", r.Body)
			}
			return respDecision("resp_s2", respSubstitute)
		})
		params := respParams("Weather in Boston?")
		params.Store = openai.Bool(false)
		out, _, hr, err := respRun(t, c, params, stream)
		if err != nil {
			t.Fatal(err)
		}
		it := out.item(t, 0)
		if it.ID != "fc_s1" || it.CallID != "call_s1" || it.Name != "get_weather" || it.Arguments != `{"location":"Boston, MA"}` || len(out.Output) != 1 {
			t.Errorf("substituted call %+v", it)
		}
		if out.ID != "resp_s1" {
			t.Errorf("id %s, want the original's (nothing was stored)", out.ID)
		}
		if !stream {
			respHeader(t, hr, "X-Toolgate-Outcome", "substituted")
			respHeader(t, hr, "X-Toolgate-Upstream-Calls", "2")
		}
		if n := len(m.requests()); n != 2 {
			t.Errorf("%d upstream calls", n)
		}
	})
}

// Stored by default: a substitute toolgate wrote would have no stored
// call of its own, and a client continuing from a stored answer would
// point the model at the stored bad call. So the model is asked again
// (correction), and the client gets the ids of the stored answer that
// holds the valid call.
func TestResponsesHallucinationCorrectedWhenStored(t *testing.T) {
	respModes(t, func(t *testing.T, stream bool) {
		m, c := respSetup(t, "", func(n int, r *respReq) respAnswer {
			if n == 1 {
				return respAnswer{ID: "resp_s1", Items: []string{respCall("fc_s1", "call_s1", "weather_lookup", `{"location":"Boston, MA"}`)}}
			}
			respCheckRequery(t, r)
			if r.field("tool_choice") == `"none"` || !strings.Contains(respFindOutput(r, "call_s1"), "get_weather") {
				t.Errorf("the recovery re-query is not a correction: %s", r.Body)
			}
			return respAnswer{ID: "resp_s2", Items: []string{respCall("fc_s2", "call_s2", "get_weather", `{"location":"Boston, MA"}`)}}
		})
		out, _, hr, err := respRun(t, c, respParams("Weather in Boston?"), stream)
		if err != nil {
			t.Fatal(err)
		}
		it := out.item(t, 0)
		if it.ID != "fc_s2" || it.CallID != "call_s2" || it.Name != "get_weather" || len(out.Output) != 1 {
			t.Errorf("corrected call %+v", it)
		}
		if out.ID != "resp_s2" {
			t.Errorf("id %s, want the correction's stored answer", out.ID)
		}
		if !stream {
			respHeader(t, hr, "X-Toolgate-Outcome", "corrected")
			respHeader(t, hr, "X-Toolgate-Upstream-Calls", "2")
		}
		if n := len(m.requests()); n != 2 {
			t.Errorf("%d upstream calls", n)
		}
	})
}

func TestResponsesArgumentsReprompted(t *testing.T) {
	respModes(t, func(t *testing.T, stream bool) {
		_, c := respSetup(t, "", func(n int, r *respReq) respAnswer {
			if n == 1 {
				return respAnswer{ID: "resp_r1", Items: []string{
					respCall("fc_r1", "call_r1", "get_weather", `{"location":"Boston, MA","unit":"kelvin"}`),
					respCall("fc_r2", "call_r2", "get_stock_price", respStockArgs)}}
			}
			respCheckRequery(t, r)
			if !strings.Contains(respFindOutput(r, "call_r1"), "/unit") || !strings.Contains(respFindOutput(r, "call_r2"), "Not executed") {
				t.Errorf("the reprompt does not carry the reasons: %s", r.Body)
			}
			return respAnswer{ID: "resp_r2", Items: []string{respCall("fc_r9", "call_r9", "get_weather", respWeatherArgs)}}
		})
		out, _, hr, err := respRun(t, c, respParams("Weather in Boston and AAPL?"), stream)
		if err != nil {
			t.Fatal(err)
		}
		// Stored by default: the repaired call carries the ids the reprompt's
		// stored answer gave it, and the answer that answer's id.
		first, second := out.item(t, 0), out.item(t, 1)
		if first.ID != "fc_r9" || first.CallID != "call_r9" || first.Arguments != respWeatherArgs || out.ID != "resp_r2" {
			t.Errorf("repaired call %+v in %s", first, out.ID)
		}
		if second.CallID != "call_r2" || second.Arguments != respStockArgs {
			t.Errorf("valid sibling %+v", second)
		}
		if !stream {
			respHeader(t, hr, "X-Toolgate-Outcome", "reprompted")
		}
	})
}

// respEscalation reads an escalation error as the SDK reports it.
func respEscalation(t *testing.T, err error) (code string, escalation map[string]any) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want an API error, got %v", err)
	}
	if apiErr.StatusCode != http.StatusUnprocessableEntity || apiErr.Type != "tool_call_escalation" {
		t.Errorf("status %d type %q", apiErr.StatusCode, apiErr.Type)
	}
	if apiErr.Response.Header.Get("X-Should-Retry") != "false" || apiErr.Response.Header.Get("X-Toolgate-Escalation-Id") == "" {
		t.Errorf("escalation headers %v", apiErr.Response.Header)
	}
	var body struct {
		Escalation map[string]any `json:"escalation"`
	}
	_ = json.Unmarshal([]byte(apiErr.RawJSON()), &body)
	return apiErr.Code, body.Escalation
}

func TestResponsesEscalated(t *testing.T) {
	script := func(text bool) func(n int, r *respReq) respAnswer {
		return func(n int, r *respReq) respAnswer {
			if n == 1 {
				items := []string{respCall("fc_e1", "call_e1", "lookup_order", `{"order":"A-1"}`)}
				if text {
					items = append([]string{respMessage("msg_e0", "Let me look up that order.")}, items...)
				}
				return respAnswer{ID: "resp_e1", Items: items}
			}
			return respDecision("resp_e2", respEscalate)
		}
	}
	t.Run("plain", func(t *testing.T) {
		_, c := respSetup(t, "", script(false))
		params := respParams("Where is order A-1?")
		params.Store = openai.Bool(false)
		_, _, _, err := respRun(t, c, params, false)
		code, esc := respEscalation(t, err)
		if code != "unknown_tool" || esc["original_intent"] != "look up an order" || esc["id"] == "" {
			t.Errorf("escalation %s %v", code, esc)
		}
	})
	// The text reached the client before the call began, so the escalation
	// can only be an error event in the stream; the SDK reports it. With
	// store: false nothing upstream holds the bad call, so it is judged
	// and recovered as usual; a stored answer is the next case.
	t.Run("stream after text", func(t *testing.T) {
		_, c := respSetup(t, "", script(true))
		params := respParams("Where is order A-1?")
		params.Store = openai.Bool(false)
		_, events, _, err := respRun(t, c, params, true)
		text := ""
		for _, e := range events {
			var d struct{ Type, Delta string }
			_ = json.Unmarshal([]byte(e), &d)
			if d.Type == "response.output_text.delta" {
				text += d.Delta
			}
			if strings.Contains(e, "lookup_order") {
				t.Errorf("the invented call reached the client: %s", e)
			}
		}
		if text != "Let me look up that order." {
			t.Errorf("text before the escalation: %q", text)
		}
		respStreamEscalation(t, err, len(events), "unknown_tool")
	})
	// A stored answer whose id already reached the client (with the text)
	// cannot be repaired: the client would continue from the id of the
	// stored bad call. It escalates without asking the model again.
	t.Run("stored stream after text", func(t *testing.T) {
		up, c := respSetup(t, "", script(true))
		_, events, _, err := respRun(t, c, respParams("Where is order A-1?"), true)
		for _, e := range events {
			if strings.Contains(e, "lookup_order") {
				t.Errorf("the invented call reached the client: %s", e)
			}
		}
		respStreamEscalation(t, err, len(events), "stateful_unrecoverable")
		if n := len(up.requests()); n != 1 {
			t.Errorf("upstream asked %d times, want 1", n)
		}
	})
	// A stream that starts with the call has sent nothing the client can
	// see (response.created is kept back), so no header has gone out either
	// and the escalation is a plain 422 (SPEC §5).
	t.Run("stream", func(t *testing.T) {
		_, c := respSetup(t, "", script(false))
		_, events, _, err := respRun(t, c, respParams("Where is order A-1?"), true)
		if len(events) != 0 {
			t.Errorf("events before the escalation: %q", events)
		}
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnprocessableEntity {
			t.Fatalf("want a plain 422 escalation, got %v", err)
		}
		if !strings.Contains(apiErr.RawJSON(), `"tool_call_escalation"`) {
			t.Errorf("422 body carries no escalation: %s", apiErr.RawJSON())
		}
	})
}

// respStreamEscalation checks an in-stream escalation as openai-go reports
// it: a StreamError carrying the `error` event.
func respStreamEscalation(t *testing.T, err error, seq int, code string) {
	t.Helper()
	var se *ssestream.StreamError
	if !errors.As(err, &se) {
		t.Fatalf("want a stream error, got %v", err)
	}
	var d struct {
		Type           string `json:"type"`
		Code           string `json:"code"`
		SequenceNumber int    `json:"sequence_number"`
		Error          struct {
			Type       string         `json:"type"`
			Code       string         `json:"code"`
			Escalation map[string]any `json:"escalation"`
		} `json:"error"`
	}
	if err := json.Unmarshal(se.Event.Data, &d); err != nil {
		t.Fatal(err)
	}
	if se.Event.Type != "error" || d.Type != "error" || d.Code != "tool_call_escalation" || d.SequenceNumber != seq ||
		d.Error.Type != "tool_call_escalation" || d.Error.Code != code || d.Error.Escalation["id"] == nil {
		t.Errorf("escalation event %s (want sequence_number %d)", se.Event.Data, seq)
	}
}

func TestResponsesEscalatedMessageMode(t *testing.T) {
	respModes(t, func(t *testing.T, stream bool) {
		_, c := respSetup(t, "escalation:\n  mode: message\n", func(n int, r *respReq) respAnswer {
			if n == 1 {
				return respAnswer{ID: "resp_m1", Items: []string{respReasoning("rs_m1"), respCall("fc_m1", "call_m1", "lookup_order", `{"order":"A-1"}`)}}
			}
			return respDecision("resp_m2", respEscalate)
		})
		out, _, hr, err := respRun(t, c, respParams("Where is order A-1?"), stream)
		if err != nil {
			t.Fatal(err)
		}
		// A stream already sent the reasoning item, which flows at once;
		// a plain answer becomes the message alone.
		want := 1
		if stream {
			want = 2
		}
		if len(out.Output) != want {
			t.Fatalf("output %s", out.Output)
		}
		it := out.item(t, want-1)
		if it.Type != "message" || !strings.HasPrefix(it.ID, "msg_toolgate_") || len(it.Content) != 1 ||
			!strings.Contains(it.Content[0].Text, "[toolgate:esc_") || len(out.Escalation) == 0 || out.Status != "completed" {
			t.Errorf("message-mode answer %+v %s", it, out.Escalation)
		}
		if !stream {
			respHeader(t, hr, "X-Toolgate-Outcome", "escalated")
		}
	})
}

// Reasoning, a message and calls in one answer: the re-query replays the
// reasoning item (with its encrypted content, the client not storing
// anything upstream) byte for byte before the calls, and the client gets
// every item where it was, only the invented call replaced.
func TestResponsesMixedItems(t *testing.T) {
	respModes(t, func(t *testing.T, stream bool) {
		items := []string{
			respReasoning("rs_x1"),
			respMessage("msg_x1", "Let me look that up."),
			respCall("fc_x1", "call_x1", "weather_lookup", `{"location":"Boston, MA"}`),
			respCall("fc_x2", "call_x2", "get_stock_price", respStockArgs),
		}
		_, c := respSetup(t, "", func(n int, r *respReq) respAnswer {
			if n == 1 {
				return respAnswer{ID: "resp_x1", Items: items}
			}
			respCheckRequery(t, r)
			if len(r.Input) != 7 {
				t.Fatalf("re-query input has %d items: %s", len(r.Input), r.Body)
			}
			for i, want := range items {
				if string(r.Input[1+i]) != want {
					t.Errorf("replayed item %d\n got %s\nwant %s", i, r.Input[1+i], want)
				}
			}
			if r.field("store") != "false" || r.field("instructions") != `"Answer briefly."` {
				t.Errorf("request fields changed: %s", r.Body)
			}
			return respDecision("resp_x2", respSubstitute)
		})
		p := respParams("")
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Weather in Boston, and AAPL?", responses.EasyInputMessageRoleUser)}}
		p.Store = openai.Bool(false)
		p.Instructions = openai.String("Answer briefly.")
		p.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
		out, _, _, err := respRun(t, c, p, stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Output) != 4 {
			t.Fatalf("output %s", out.Output)
		}
		for _, i := range []int{0, 1, 3} {
			if !respSameJSON(out.Output[i], []byte(items[i])) {
				t.Errorf("item %d changed: %s", i, out.Output[i])
			}
		}
		if it := out.item(t, 2); it.ID != "fc_x1" || it.CallID != "call_x1" || it.Name != "get_weather" {
			t.Errorf("substituted call %+v", it)
		}
	})
}

// A request that continues a stored conversation: the re-query chains on
// the bad answer's id and sends only the outputs; the client gets the
// re-query's id and the call the upstream stored, and can continue from it.
func TestResponsesChainedPreviousResponseID(t *testing.T) {
	respModes(t, func(t *testing.T, stream bool) {
		m, c := respSetup(t, "", func(n int, r *respReq) respAnswer {
			switch n {
			case 1:
				return respAnswer{ID: "resp_c1", Items: []string{respCall("fc_c1", "call_c1", "get_weather", respWeatherArgs)}}
			case 2:
				return respAnswer{ID: "resp_c2", Items: []string{respCall("fc_c2", "call_c2", "get_stock_price", `{"ticker":"AAPL"}`)}}
			case 3:
				respCheckRequery(t, r)
				if r.Prev != "resp_c2" || len(r.Input) != 1 || !strings.Contains(respFindOutput(r, "call_c2"), "exchange") {
					t.Errorf("the re-query does not chain on the bad answer: %s", r.Body)
				}
				return respAnswer{ID: "resp_c3", Items: []string{respCall("fc_c3", "call_c3", "get_stock_price", respStockArgs)}}
			default:
				return respAnswer{ID: "resp_c4", Items: []string{respMessage("msg_c4", "AAPL trades at 227.10.")}}
			}
		})
		first, _, _, err := respRun(t, c, respParams("Weather in Boston, then AAPL"), false)
		if err != nil {
			t.Fatal(err)
		}
		p := respParams("")
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{respOutputParam("call_c1", "12 C")}}
		p.PreviousResponseID = openai.String(first.ID)
		out, _, hr, err := respRun(t, c, p, stream)
		if err != nil {
			t.Fatal(err)
		}
		if out.ID != "resp_c3" {
			t.Errorf("id %s, want the re-query's", out.ID)
		}
		it := out.item(t, 0)
		if it.ID != "fc_c3" || it.CallID != "call_c3" || it.Arguments != respStockArgs {
			t.Errorf("repaired call %+v", it)
		}
		if !stream {
			respHeader(t, hr, "X-Toolgate-Outcome", "reprompted")
		}
		next := respParams("")
		next.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{respOutputParam(it.CallID, "227.10")}}
		next.PreviousResponseID = openai.String(out.ID)
		if _, _, _, err := respRun(t, c, next, false); err != nil {
			t.Fatalf("the client cannot continue from the repaired answer: %v", err)
		}
		if n := len(m.requests()); n != 4 {
			t.Errorf("%d upstream calls", n)
		}
	})
}

// A chained stream whose text went out first has given the client the
// stored id: a re-query would need another, so it escalates.
func TestResponsesChainedStreamCommitted(t *testing.T) {
	m, c := respSetup(t, "", func(n int, r *respReq) respAnswer {
		return respAnswer{ID: "resp_k1", Items: []string{respMessage("msg_k1", "Checking."), respCall("fc_k1", "call_k1", "stock_quote", `{"ticker":"AAPL"}`)}}
	})
	p := respParams("AAPL?")
	m.mu.Lock()
	m.stored["resp_k0"] = respConversation{}
	m.mu.Unlock()
	p.PreviousResponseID = openai.String("resp_k0")
	_, events, _, err := respRun(t, c, p, true)
	var se *ssestream.StreamError
	if !errors.As(err, &se) || !strings.Contains(string(se.Event.Data), `"stateful_unrecoverable"`) {
		t.Fatalf("want a stateful_unrecoverable escalation, got %v", err)
	}
	if len(events) == 0 || !strings.Contains(events[0], `"id":"resp_k1"`) {
		t.Errorf("events %q", events)
	}
	if n := len(m.requests()); n != 1 {
		t.Errorf("%d upstream calls", n)
	}
}

func TestResponsesConversationStateful(t *testing.T) {
	m, c := respSetup(t, "", func(n int, r *respReq) respAnswer {
		return respAnswer{ID: "resp_q1", Items: []string{respCall("fc_q1", "call_q1", "get_weather", `{"location":"Boston, MA","unit":"kelvin"}`)}}
	})
	p := respParams("Weather in Boston?")
	p.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String("conv_1")}
	_, _, _, err := respRun(t, c, p, false)
	code, esc := respEscalation(t, err)
	if code != "stateful_unrecoverable" {
		t.Errorf("code %q, escalation %v", code, esc)
	}
	if n := len(m.requests()); n != 1 {
		t.Errorf("%d upstream calls: a conversation cannot be re-queried", n)
	}
}

func respOutputParam(callID, output string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
		CallID: openai.String(callID),
		Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(output)},
	}}
}
