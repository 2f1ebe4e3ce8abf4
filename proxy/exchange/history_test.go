package exchange

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/anthropic"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/gemini"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/proxy/responses"
	"github.com/toolgate/toolgate/validate"
)

// historyConversation is one conversation written in each API's shape:
// two calls made in parallel and answered out of order (Anthropic, whose
// API wants results in call order, answers in order), a result that is
// not JSON, an error result, and a result for an id no call carries.
var historyConversation = map[string]string{
	"chat": `{"model":"m","messages":[
		{"role":"user","content":"look up ord_1 and ord_2"},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"c1","type":"function","function":{"name":"get_order","arguments":"{\"order_id\":\"ord_1\"}"}},
			{"id":"c2","type":"function","function":{"name":"get_order","arguments":"{\"order_id\":\"ord_2\"}"}}]},
		{"role":"tool","tool_call_id":"c2","content":"order not found"},
		{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"{\"order_id\":\"ord_1\",\"total_cents\":4000}"}]},
		{"role":"tool","tool_call_id":"c_ghost","content":"{\"order_id\":\"ord_ghost\"}"},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"c3","type":"function","function":{"name":"list_refunds","arguments":"not json"}}]},
		{"role":"tool","tool_call_id":"c3","content":"[]"},
		{"role":"user","content":"refund ord_1"}]}`,
	"messages": `{"model":"m","max_tokens":10,"messages":[
		{"role":"user","content":"look up ord_1 and ord_2"},
		{"role":"assistant","content":[{"type":"text","text":"looking"},
			{"type":"tool_use","id":"c1","name":"get_order","input":{"order_id":"ord_1"}},
			{"type":"tool_use","id":"c2","name":"get_order","input":{"order_id":"ord_2"}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"{\"order_id\":\"ord_1\","},{"type":"text","text":"\"total_cents\":4000}"}]},
			{"type":"tool_result","tool_use_id":"c2","content":"order not found","is_error":true},
			{"type":"tool_result","tool_use_id":"c_ghost","content":"{\"order_id\":\"ord_ghost\"}"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"c3","name":"list_refunds","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"c3","content":"[]"},{"type":"text","text":"refund ord_1"}]}]}`,
	"responses": `{"model":"m","input":[
		{"role":"user","content":"look up ord_1 and ord_2"},
		{"type":"function_call","call_id":"c1","name":"get_order","arguments":"{\"order_id\":\"ord_1\"}"},
		{"type":"function_call","call_id":"c2","name":"get_order","arguments":"{\"order_id\":\"ord_2\"}"},
		{"type":"function_call_output","call_id":"c2","output":"order not found"},
		{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"{\"order_id\":\"ord_1\",\"total_cents\":4000}"}]},
		{"type":"function_call_output","call_id":"c_ghost","output":"{\"order_id\":\"ord_ghost\"}"},
		{"type":"function_call","call_id":"c3","name":"list_refunds","arguments":"not json"},
		{"type":"function_call_output","call_id":"c3","output":"[]"},
		{"role":"user","content":"refund ord_1"}]}`,
}

var historyAPIs = map[string]api.API{
	"chat": openaichat.API{}, "messages": anthropic.API{}, "responses": responses.API{},
}

// decodeHistory reads body with a's codec and views its history as the
// checks do.
func decodeHistory(t testing.TB, a api.API, path, body string) (*neutral.Request, *validate.History) {
	t.Helper()
	req, err := a.NewCodec().DecodeRequest(path, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req, validate.HistoryOf(req.History)
}

// entryJSON renders entries with numbers as written, for comparison.
func entryJSON(t *testing.T, es []validate.HistoryEntry) []string {
	t.Helper()
	var out []string
	for _, e := range es {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

func TestHistoryFromEachAPI(t *testing.T) {
	for name, body := range historyConversation {
		t.Run(name, func(t *testing.T) {
			_, h := decodeHistory(t, historyAPIs[name], "", body)
			// Anthropic's input is an object, so the third call's
			// arguments are {}; the others carry text that is not JSON.
			args3, isErr2 := `"not json"`, "false"
			if name == "messages" {
				args3, isErr2 = `{}`, "true"
			}
			want := []string{
				`{"id":"c1","tool":"get_order","args":{"order_id":"ord_1"},"result":{"order_id":"ord_1","total_cents":4000},"is_error":false}`,
				`{"id":"c2","tool":"get_order","args":{"order_id":"ord_2"},"result":"order not found","is_error":` + isErr2 + `}`,
				`{"id":"c3","tool":"list_refunds","args":` + args3 + `,"result":[],"is_error":false}`,
			}
			if got := entryJSON(t, h.Entries()); !reflect.DeepEqual(got, want) {
				t.Fatalf("history\n got %s\nwant %s", strings.Join(got, "\n    "), strings.Join(want, "\n    "))
			}
		})
	}
}

// A call the conversation has not answered yet has no result.
func TestHistoryUnansweredCall(t *testing.T) {
	body := `{"model":"m","input":[{"type":"function_call","call_id":"c1","name":"get_order","arguments":"{}"}]}`
	_, h := decodeHistory(t, responses.API{}, "", body)
	es := h.Entries()
	if len(es) != 1 || es[0].Result != nil || es[0].IsError {
		t.Fatalf("entries %+v", es)
	}
}

// Earlier turns stored upstream make the history incomplete, and results
// answering calls the request does not carry pair with nothing.
func TestHistoryStoredUpstream(t *testing.T) {
	body := `{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c1","output":"{\"order_id\":\"ord_1\"}"}]}`
	req, h := decodeHistory(t, responses.API{}, "", body)
	if !req.HistoryUpstream || len(h.Entries()) != 0 {
		t.Fatalf("upstream %v entries %+v", req.HistoryUpstream, h.Entries())
	}
	cx := validate.Context{Evidence: validate.NewCorpus(req.Vouching), HistoryUpstream: req.HistoryUpstream}
	if cx.HistoryComplete() {
		t.Fatal("history_complete with previous_response_id")
	}
}

// longChat is a chat conversation of n call/result pairs (2n messages plus
// the user's), each a get_order of another order.
func longChat(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[{"role":"user","content":"go"}`)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `,{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"get_order","arguments":"{\"order_id\":\"ord_%d\"}"}}]}`, i, i)
		fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":"c%d","content":"{\"order_id\":\"ord_%d\",\"customer_id\":\"c_1\",\"total_cents\":4000,\"refunded_cents\":1500}"}`, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func TestHistoryLongConversation(t *testing.T) {
	_, h := decodeHistory(t, openaichat.API{}, "", string(longChat(250)))
	es := h.Entries()
	if len(es) != 250 || es[0].ID != "c0" || es[249].ID != "c249" {
		t.Fatalf("%d entries, first %q", len(es), es[0].ID)
	}
	if r, ok := es[249].Result.(map[string]any); !ok || r["order_id"] != "ord_249" {
		t.Fatalf("last result %#v", es[249].Result)
	}
}

// FuzzHistory feeds each codec's request reader arbitrary bodies: it
// never panics, and whatever history it reads encodes as JSON for the
// validators.
func FuzzHistory(f *testing.F) {
	for _, body := range historyConversation {
		f.Add(body)
	}
	f.Add(`{"messages":[{"role":"assistant","tool_calls":[{"id":1}]}]}`)
	f.Add(`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"x","input":"s"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"image"}]}]}]}`)
	f.Add(`{"input":[{"type":"function_call","call_id":"x","arguments":"{\"a\":1e999}"},{"type":"function_call_output","call_id":"x","output":"\ud800"}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		for _, a := range historyAPIs {
			req, err := a.NewCodec().DecodeRequest("", []byte(body))
			if err != nil || req.History == nil {
				continue
			}
			if _, err := json.Marshal(validate.HistoryOf(req.History).Entries()); err != nil {
				t.Fatalf("%s: history does not encode: %v", a.Name(), err)
			}
		}
	})
}

// Gemini pairs a functionResponse with the calls of the model turn before
// it by id when the model sent one, else by name in order; calls without
// an id are keyed by turn, name and place. Out-of-order answers pair
// right, an "error" object is an error result, and a response to a name
// the turn never called, or before any model turn, pairs with nothing.
func TestHistoryFromGemini(t *testing.T) {
	body := `{"contents":[
		{"role":"user","parts":[{"functionResponse":{"name":"get_order","response":{"output":"early"}}},{"text":"look up ord_1"}]},
		{"role":"model","parts":[{"text":"looking","thought":true,"thoughtSignature":"c2ln"},
			{"functionCall":{"name":"get_order","args":{"order_id":"ord_1"}}},
			{"functionCall":{"name":"list_refunds"}}]},
		{"role":"user","parts":[
			{"functionResponse":{"name":"list_refunds","response":{"output":[]}}},
			{"functionResponse":{"name":"get_order","response":{"output":{"order_id":"ord_1","total_cents":4000}}}},
			{"functionResponse":{"name":"cancel_order","response":{"output":"ghost"}}}]},
		{"role":"model","parts":[
			{"functionCall":{"id":"c1","name":"get_order","args":{"order_id":"ord_1"}}},
			{"functionCall":{"id":"c2","name":"get_order","args":{"order_id":"ord_2"}}}]},
		{"role":"user","parts":[
			{"functionResponse":{"id":"c2","name":"get_order","response":{"error":"order not found"}}},
			{"functionResponse":{"id":"c1","name":"get_order","response":{"output":{"order_id":"ord_1"}}}}]},
		{"role":"user","parts":[{"text":"refund ord_1"}]}]}`
	_, h := decodeHistory(t, gemini.API{}, "/v1beta/models/m:generateContent", body)
	want := []string{
		`{"id":"get_order#1.1","tool":"get_order","args":{"order_id":"ord_1"},"result":{"output":{"order_id":"ord_1","total_cents":4000}},"is_error":false}`,
		`{"id":"list_refunds#1.1","tool":"list_refunds","args":{},"result":{"output":[]},"is_error":false}`,
		`{"id":"c1","tool":"get_order","args":{"order_id":"ord_1"},"result":{"output":{"order_id":"ord_1"}},"is_error":false}`,
		`{"id":"c2","tool":"get_order","args":{"order_id":"ord_2"},"result":{"error":"order not found"},"is_error":true}`,
	}
	if got := entryJSON(t, h.Entries()); !reflect.DeepEqual(got, want) {
		t.Fatalf("history\n got %s\nwant %s", strings.Join(got, "\n    "), strings.Join(want, "\n    "))
	}
}
