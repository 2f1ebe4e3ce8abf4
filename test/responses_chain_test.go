package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// lastCall is the last function_call of a model's context with the given
// call_id, or nil.
func lastCall(ctx []json.RawMessage, callID string) *respItem {
	var found *respItem
	for _, raw := range ctx {
		var it respItem
		if json.Unmarshal(raw, &it) == nil && it.Type == "function_call" && it.CallID == callID {
			found = &it
		}
	}
	return found
}

// After a repair, a client that continues the stored conversation, by
// previous_response_id or by an item_reference to the call it got (as
// Mastra's Responses model does), gives the model a context that holds
// the valid call, never the stored bad one. The mock stores every answer
// by id and resolves both, as the API does.
func TestResponsesRepairChainsOnTheValidCall(t *testing.T) {
	bad := `{"location":"Boston, MA","unit":"kelvin"}`
	respModes(t, func(t *testing.T, stream bool) {
		m := newRespMock(t, func(n int, r *respReq) respAnswer {
			switch n {
			case 1:
				return respAnswer{ID: "resp_b1", Items: []string{respCall("fc_b1", "call_b1", "get_weather", bad)}}
			case 2:
				return respAnswer{ID: "resp_v2", Items: []string{respCall("fc_v2", "call_v2", "get_weather", respWeatherArgs)}}
			}
			return respAnswer{ID: fmt.Sprintf("resp_n%d", n), Items: []string{respMessage(fmt.Sprintf("msg_n%d", n), "It is 14°C in Boston.")}}
		})
		gateURL := respStartGate(t, m.srv.URL, "")
		c := respClient(gateURL)
		out, _, _, err := respRun(t, c, respParams("Weather in Boston?"), stream)
		if err != nil {
			t.Fatal(err)
		}
		got := out.item(t, 0)
		if got.Arguments != respWeatherArgs {
			t.Fatalf("released call %+v, want the repaired one", got)
		}
		output := `{"type":"function_call_output","call_id":` + mustJSON(got.CallID) + `,"output":"14°C"}`

		// The next turn by previous_response_id.
		st, _, b, err := postRaw(gateURL+"/v1/responses", `{"model":"gpt-5","previous_response_id":`+mustJSON(out.ID)+
			`,"input":[`+output+`]}`, nil)
		if err != nil || st != http.StatusOK {
			t.Fatalf("next turn by previous_response_id: %d %v %s", st, err, b)
		}
		reqs := m.requests()
		if call := lastCall(reqs[len(reqs)-1].Context, got.CallID); call == nil || call.Arguments != respWeatherArgs {
			t.Errorf("by previous_response_id %s the model sees %+v for %s, want the valid call", out.ID, call, got.CallID)
		}

		// The next turn by item_reference, stateless.
		st, _, b, err = postRaw(gateURL+"/v1/responses", `{"model":"gpt-5","input":[{"role":"user","content":"Weather in Boston?"},`+
			`{"type":"item_reference","id":`+mustJSON(got.ID)+`},`+output+`]}`, nil)
		if err != nil || st != http.StatusOK {
			t.Fatalf("next turn by item_reference: %d %v %s", st, err, b)
		}
		reqs = m.requests()
		if call := lastCall(reqs[len(reqs)-1].Context, got.CallID); call == nil || call.Arguments != respWeatherArgs {
			t.Errorf("by item_reference %s the model sees %+v, want the valid call", got.ID, call)
		}
	})
}
