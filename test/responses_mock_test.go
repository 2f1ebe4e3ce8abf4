package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/sse"
)

// respReq is one request the scripted Responses upstream received.
type respReq struct {
	N    int
	Body []byte
	// Input is the request's input as items (a string input as the user
	// message it stands for).
	Input []json.RawMessage
	Prev  string
	// Stream is the request's stream flag.
	Stream bool
	// Context is what the model was given: the stored conversation of
	// Prev, then the input with each item_reference resolved.
	Context []json.RawMessage
}

// field returns a top-level field of the request body, raw.
func (r *respReq) field(name string) string {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(r.Body, &m)
	return string(m[name])
}

// respAnswer is what the scripted upstream answers. Items are raw output
// items; the mock sends them as a response object or, for a streamed
// request, as the event stream the API would send. A Status other than 0 or
// 200 sends Error instead.
type respAnswer struct {
	ID     string
	Items  []string
	Status int
	Error  string
	// Incomplete ends the answer at max_output_tokens.
	Incomplete bool
}

// respMock stands in for the Responses API. Besides answering from its
// script, it plays the provider's referee, from the stored conversation
// (previous_response_id) and the input: a function_call_output whose
// call_id matches no call is refused with the API's 400, and so is a call
// left without its output; an unknown previous_response_id is refused too.
// Every refusal fails the test, since toolgate must never send one.
type respMock struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	reqs     []*respReq
	rejected []string
	// stored maps a response id to the whole conversation up to and
	// including that response's output, and its output alone.
	stored map[string]respConversation
	// items maps the id of every output item stored to the item, which an
	// item_reference names.
	items  map[string]json.RawMessage
	script func(n int, r *respReq) respAnswer
}

type respConversation struct {
	items  []json.RawMessage
	output []json.RawMessage
}

func newRespMock(t *testing.T, script func(n int, r *respReq) respAnswer) *respMock {
	t.Helper()
	m := &respMock{t: t, script: script, stored: map[string]respConversation{}, items: map[string]json.RawMessage{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(func() {
		m.srv.Close()
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, r := range m.rejected {
			t.Errorf("mock upstream refused a request as the Responses API would: %s", r)
		}
	})
	return m
}

func (m *respMock) requests() []*respReq {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*respReq(nil), m.reqs...)
}

func (m *respMock) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var head struct {
		Input              json.RawMessage `json:"input"`
		PreviousResponseID string          `json:"previous_response_id"`
		Stream             bool            `json:"stream"`
		Conversation       json.RawMessage `json:"conversation"`
	}
	if r.URL.Path != "/v1/responses" || json.Unmarshal(body, &head) != nil {
		respWriteError(w, http.StatusBadRequest, "unexpected request to "+r.URL.Path)
		return
	}
	req := &respReq{Body: body, Prev: head.PreviousResponseID, Stream: head.Stream}
	if s, ok := jsonx.Unquote(head.Input); ok {
		req.Input = []json.RawMessage{json.RawMessage(`{"role":"user","content":` + string(jsonx.String(s)) + `}`)}
	} else if len(head.Input) > 0 {
		_ = json.Unmarshal(head.Input, &req.Input)
	}
	m.mu.Lock()
	req.N = len(m.reqs) + 1
	m.reqs = append(m.reqs, req)
	var history respConversation
	known := true
	if req.Prev != "" {
		history, known = m.stored[req.Prev]
	}
	input, missing := m.resolve(req.Input)
	req.Context = append(append([]json.RawMessage(nil), history.items...), input...)
	m.mu.Unlock()

	msg := ""
	switch {
	case !known:
		msg = fmt.Sprintf("Previous response with id '%s' not found.", req.Prev)
	case missing != "":
		msg = fmt.Sprintf("Item with id '%s' not found.", missing)
	default:
		msg = respReferee(history, input)
	}
	if msg != "" {
		m.mu.Lock()
		m.rejected = append(m.rejected, fmt.Sprintf("request #%d: %s", req.N, msg))
		m.mu.Unlock()
		respWriteError(w, http.StatusBadRequest, msg)
		return
	}

	a := m.script(req.N, req)
	if a.Status != 0 && a.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.Status)
		_, _ = io.WriteString(w, a.Error)
		return
	}
	output := make([]json.RawMessage, len(a.Items))
	for i, it := range a.Items {
		output[i] = json.RawMessage(it)
	}
	if len(head.Conversation) == 0 {
		conv := respConversation{items: append(append(append([]json.RawMessage(nil), history.items...), req.Input...), output...), output: output}
		m.mu.Lock()
		m.stored[a.ID] = conv
		for _, it := range output {
			var head struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(it, &head) == nil && head.ID != "" {
				m.items[head.ID] = it
			}
		}
		m.mu.Unlock()
	}
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_resp_%d", req.N))
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(respStreamOf(a, req.Prev))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, respObject(a, "completed", req.Prev, a.Items))
}

// resolve replaces each item_reference of input with the stored item it
// names; missing is the first id the store does not hold. The caller
// holds m.mu.
func (m *respMock) resolve(input []json.RawMessage) (out []json.RawMessage, missing string) {
	for _, raw := range input {
		var head struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}
		if json.Unmarshal(raw, &head) != nil || head.Type != "item_reference" {
			out = append(out, raw)
			continue
		}
		it, ok := m.items[head.ID]
		if !ok && missing == "" {
			missing = head.ID
		}
		out = append(out, it)
	}
	return out, missing
}

// respReferee applies the Responses API's pairing rules to a request: every
// tool output answers a call earlier in the conversation, and every call
// of the previous response or of the input gets its output in this input.
func respReferee(history respConversation, input []json.RawMessage) string {
	type item struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
	}
	calls := map[string]bool{}
	for _, raw := range history.items {
		var it item
		_ = json.Unmarshal(raw, &it)
		if it.Type == "function_call" || it.Type == "custom_tool_call" {
			calls[it.CallID] = true
		}
	}
	answered := map[string]bool{}
	var open []string
	for _, raw := range input {
		var it item
		if err := json.Unmarshal(raw, &it); err != nil {
			return "Invalid input item."
		}
		switch it.Type {
		case "function_call", "custom_tool_call":
			calls[it.CallID] = true
			open = append(open, it.CallID)
		case "function_call_output", "custom_tool_call_output":
			if !calls[it.CallID] {
				return fmt.Sprintf("No tool call found for function call output with call_id %s.", it.CallID)
			}
			answered[it.CallID] = true
		}
	}
	for _, raw := range history.output {
		var it item
		_ = json.Unmarshal(raw, &it)
		if (it.Type == "function_call" || it.Type == "custom_tool_call") && !answered[it.CallID] {
			open = append(open, it.CallID)
		}
	}
	for _, id := range open {
		if !answered[id] {
			return fmt.Sprintf("No tool output found for function call %s.", id)
		}
	}
	return ""
}

func respWriteError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": "input", "code": nil}})
	_, _ = w.Write(b)
}

// respObject is a response object with the given output items.
func respObject(a respAnswer, status, prev string, items []string) string {
	raws := make([][]byte, len(items))
	for i, it := range items {
		raws[i] = []byte(it)
	}
	incomplete := "null"
	if a.Incomplete && status != "in_progress" {
		status, incomplete = "incomplete", `{"reason":"max_output_tokens"}`
	}
	prevJSON := "null"
	if prev != "" {
		prevJSON = string(jsonx.String(prev))
	}
	usage := `null`
	if status != "in_progress" {
		usage = `{"input_tokens":120,"input_tokens_details":{"cached_tokens":0},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":8},"total_tokens":150}`
	}
	return `{"id":` + string(jsonx.String(a.ID)) + `,"object":"response","created_at":1741294021,"status":"` + status +
		`","background":false,"error":null,"incomplete_details":` + incomplete + `,"instructions":null,"max_output_tokens":null,` +
		`"model":"gpt-5-2025-08-07","output":` + string(jsonx.AppendArray(nil, raws)) + `,"parallel_tool_calls":true,` +
		`"previous_response_id":` + prevJSON + `,"reasoning":{"effort":"low","summary":null},"store":true,"temperature":1.0,` +
		`"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled",` +
		`"usage":` + usage + `,"user":null,"metadata":{}}`
}

// respStreamOf streams an answer the way the API does: response.created and
// response.in_progress, then each item (added, its deltas, done), then the
// terminal event, every event numbered.
func respStreamOf(a respAnswer, prev string) []byte {
	var out []byte
	seq := 0
	emit := func(typ string, fields ...jsonx.Field) {
		o := jsonx.Object{{Key: "type", Value: jsonx.String(typ)}, {Key: "sequence_number", Value: []byte(strconv.Itoa(seq))}}
		seq++
		out = sse.AppendEvent(out, typ, append(o, fields...).Bytes())
	}
	f := func(k string, v []byte) jsonx.Field { return jsonx.Field{Key: k, Value: v} }
	num := func(i int) []byte { return []byte(strconv.Itoa(i)) }
	pieces := func(s string) []string {
		var ps []string
		for len(s) > 7 {
			ps = append(ps, s[:7])
			s = s[7:]
		}
		return append(ps, s)
	}
	emit("response.created", f("response", []byte(respObject(a, "in_progress", prev, nil))))
	emit("response.in_progress", f("response", []byte(respObject(a, "in_progress", prev, nil))))
	for i, s := range a.Items {
		o, _ := jsonx.ParseObject([]byte(s))
		var it struct {
			Type    string `json:"type"`
			ID      string `json:"id"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal([]byte(s), &it)
		id := jsonx.String(it.ID)
		switch it.Type {
		case "function_call":
			full, _ := jsonx.Unquote(o.Get("arguments"))
			added := append(jsonx.Object(nil), o...).Set("status", []byte(`"in_progress"`)).Set("arguments", []byte(`""`))
			emit("response.output_item.added", f("output_index", num(i)), f("item", added.Bytes()))
			for _, p := range pieces(full) {
				emit("response.function_call_arguments.delta", f("item_id", id), f("output_index", num(i)), f("delta", jsonx.String(p)))
			}
			emit("response.function_call_arguments.done", f("item_id", id), f("output_index", num(i)), f("arguments", jsonx.String(full)))
		case "message":
			added := append(jsonx.Object(nil), o...).Set("status", []byte(`"in_progress"`)).Set("content", []byte("[]"))
			emit("response.output_item.added", f("output_index", num(i)), f("item", added.Bytes()))
			for c, p := range it.Content {
				emit("response.content_part.added", f("item_id", id), f("output_index", num(i)), f("content_index", num(c)),
					f("part", []byte(`{"type":"output_text","annotations":[],"text":""}`)))
				for _, d := range pieces(p.Text) {
					emit("response.output_text.delta", f("item_id", id), f("output_index", num(i)), f("content_index", num(c)),
						f("delta", jsonx.String(d)), f("logprobs", []byte("[]")))
				}
				emit("response.output_text.done", f("item_id", id), f("output_index", num(i)), f("content_index", num(c)),
					f("text", jsonx.String(p.Text)), f("logprobs", []byte("[]")))
				emit("response.content_part.done", f("item_id", id), f("output_index", num(i)), f("content_index", num(c)),
					f("part", []byte(`{"type":"output_text","annotations":[],"text":`+string(jsonx.String(p.Text))+`}`)))
			}
		case "reasoning":
			added := append(jsonx.Object(nil), o...).Set("summary", []byte("[]"))
			emit("response.output_item.added", f("output_index", num(i)), f("item", added.Bytes()))
		default:
			emit("response.output_item.added", f("output_index", num(i)), f("item", []byte(s)))
		}
		emit("response.output_item.done", f("output_index", num(i)), f("item", []byte(s)))
	}
	terminal := "response.completed"
	if a.Incomplete {
		terminal = "response.incomplete"
	}
	emit(terminal, f("response", []byte(respObject(a, "completed", prev, a.Items))))
	return out
}

// respEventsOf splits a stream into the data of its events.
func respEventsOf(b []byte) []string {
	var out []string
	rd := sse.NewReader(bytes.NewReader(b), 0)
	for rd.Next() {
		if ev := rd.Event(); len(ev.Data) > 0 && !ev.Comment {
			out = append(out, string(ev.Data))
		}
	}
	return out
}

// respCall is a function_call output item.
func respCall(itemID, callID, name, args string) string {
	return `{"id":"` + itemID + `","type":"function_call","status":"completed","arguments":` + string(jsonx.String(args)) +
		`,"call_id":"` + callID + `","name":"` + name + `"}`
}

// respMessage is an assistant message output item.
func respMessage(itemID, text string) string {
	return `{"id":"` + itemID + `","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":` +
		string(jsonx.String(text)) + `}],"role":"assistant"}`
}

// respReasoning is a reasoning item with encrypted content, as a stateless
// (store: false) client receives it.
func respReasoning(itemID string) string {
	return `{"id":"` + itemID + `","type":"reasoning","encrypted_content":"gAAAAABoZ3x` + strings.Repeat("Qk", 20) +
		`==","summary":[{"type":"summary_text","text":"The user wants the weather."}]}`
}

// The referee refuses what the Responses API refuses, so a re-query that
// passes it would pass the provider's pairing checks too.
func TestResponsesMockRefereeRejects(t *testing.T) {
	m := newRespMock(t, func(n int, r *respReq) respAnswer {
		return respAnswer{ID: fmt.Sprintf("resp_ref%d", n), Items: []string{respCall("fc_1", "call_1", "f", "{}")}}
	})
	post := func(body string) int {
		resp, err := http.Post(m.srv.URL+"/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if post(`{"model":"m","input":"hi"}`) != http.StatusOK {
		t.Fatal("a plain request was refused")
	}
	refused := []string{
		`{"model":"m","input":[{"type":"function_call_output","call_id":"call_x","output":"1"}]}`,
		`{"model":"m","input":[{"type":"function_call","call_id":"call_y","name":"f","arguments":"{}"}]}`,
		`{"model":"m","previous_response_id":"resp_ref1","input":"next question"}`,
		`{"model":"m","previous_response_id":"resp_ref1","input":[{"type":"function_call_output","call_id":"call_z","output":"1"}]}`,
		`{"model":"m","previous_response_id":"resp_nope","input":"x"}`,
	}
	for _, b := range refused {
		if got := post(b); got != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", b, got)
		}
	}
	accepted := []string{
		`{"model":"m","previous_response_id":"resp_ref1","input":[{"type":"function_call_output","call_id":"call_1","output":"1"}]}`,
		`{"model":"m","input":[{"type":"function_call","call_id":"call_y","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"call_y","output":"1"}]}`,
	}
	for _, b := range accepted {
		if got := post(b); got != http.StatusOK {
			t.Errorf("%s: status %d, want 200", b, got)
		}
	}
	m.mu.Lock()
	if len(m.rejected) != len(refused) {
		t.Errorf("%d refusals recorded", len(m.rejected))
	}
	m.rejected = nil
	m.mu.Unlock()
}
