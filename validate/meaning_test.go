package validate_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/validate"
)

// meaningConfig holds rules that read the conversation, the answer's other
// calls and the request's context, as config.yaml's refund example does.
const meaningConfig = `
upstreams: [{url: "https://api.openai.com"}]
catalog:
  context:
    customer_id: {header: X-Customer-Id}
  tools:
    - name: get_order
      parameters: {type: object}
    - name: issue_refund
      parameters:
        type: object
        properties: {order_id: {type: string}, amount_cents: {type: integer}}
        required: [order_id, amount_cents]
      rules:
        - expr: >-
            history.exists(h, h.tool == 'get_order' && !h.is_error && type(h.result) == map
            && has(h.result.order_id) && h.result.order_id == args.order_id)
          message: order not loaded; call get_order first
        - expr: >-
            history.all(h, !(h.tool == 'get_order' && type(h.result) == map && has(h.result.order_id)
            && h.result.order_id == args.order_id) || args.amount_cents <= h.result.total_cents - h.result.refunded_cents)
          message: amount exceeds the refundable balance
    - name: close_account
      parameters: {type: object}
      rules:
        - expr: "context.customer_id == 'c_1'"
          message: only the signed-in customer's account
    - name: send_note
      parameters: {type: object}
      rules:
        - expr: "calls.all(c, c.tool != 'send_note')"
          message: one note per answer
        - expr: "history_complete"
          message: the whole conversation is needed
    - name: heavy
      parameters: {type: object}
      rules:
        - expr: "history.all(a, history.all(b, a.id != b.id || a.tool == b.tool))"
          message: quadratic rule
`

const order1 = `{"order_id":"ord_1","customer_id":"c_1","total_cents":4000,"refunded_cents":1500}`

func meaningContext(t testing.TB, h *validate.History, values map[string]string) *validate.Context {
	t.Helper()
	snap := compileTestSnapshot(t, meaningConfig)
	return &validate.Context{
		Effective: snap.Effective(offerTools("get_order", "issue_refund", "close_account", "send_note", "heavy"), catalog.ToolChoice{}, true),
		Evidence:  validate.NewCorpus(nil),
		History:   h,
		Values:    values,
	}
}

func messages(v validate.CallReport) []string {
	var out []string
	for _, f := range v.Findings {
		out = append(out, f.Message)
	}
	return out
}

func TestRulesReadHistory(t *testing.T) {
	loaded := func() *validate.History {
		h := &validate.History{}
		h.AddCall("c1", "get_order", []byte(`{"order_id":"ord_1"}`))
		h.AddCall("c2", "get_order", []byte(`{"order_id":"ord_2"}`))
		h.AddResult("c2", "order not found", false, nil)
		h.AddResult("c1", order1, false, nil)
		// A result for an id no call carries vouches for nothing.
		h.AddResult("ghost", `{"order_id":"ord_3","customer_id":"c_1","total_cents":1,"refunded_cents":0}`, false, nil)
		return h
	}
	for _, tc := range []struct {
		name string
		h    *validate.History
		args string
		want []string
	}{
		{"within the balance", loaded(), `{"order_id":"ord_1","amount_cents":2500}`, nil},
		{"over the balance", loaded(), `{"order_id":"ord_1","amount_cents":2501}`, []string{"amount exceeds the refundable balance"}},
		{"result not JSON", loaded(), `{"order_id":"ord_2","amount_cents":1}`, []string{"order not loaded; call get_order first"}},
		{"answer to an unknown id", loaded(), `{"order_id":"ord_3","amount_cents":1}`, []string{"order not loaded; call get_order first"}},
		{"no history", nil, `{"order_id":"ord_1","amount_cents":1}`, []string{"order not loaded; call get_order first"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(fnCall("issue_refund", tc.args), meaningContext(t, tc.h, nil))
			if got := messages(v); strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("findings %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRuleMissingContextNamesKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]string
		want   string
	}{
		{"present and equal", map[string]string{"customer_id": "c_1"}, ""},
		{"present and different", map[string]string{"customer_id": "c_2"}, "only the signed-in customer's account"},
		{"absent", nil, `context value "customer_id" is missing, so the rule cannot hold: only the signed-in customer's account`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := validate.Check(fnCall("close_account", `{}`), meaningContext(t, nil, tc.values))
			got := strings.Join(messages(v), "|")
			if got != tc.want {
				t.Fatalf("findings %q, want %q", got, tc.want)
			}
			if tc.want != "" && (v.Valid() || v.Findings[0].Code != validate.RuleViolation) {
				t.Fatalf("report %+v", v)
			}
		})
	}
}

// A rule's calls are the other calls of the same answer.
func TestRuleSeesSiblingCalls(t *testing.T) {
	cx := meaningContext(t, nil, nil)
	note := fnCall("send_note", `{}`)
	other := fnCall("get_order", `{}`)
	if v := validate.CheckIn([]validate.ToolCall{note, other}, 0, cx); !v.Valid() {
		t.Fatalf("one note: %q", messages(v))
	}
	batch := []validate.ToolCall{note, other, note}
	for _, i := range []int{0, 2} {
		if got := messages(validate.CheckIn(batch, i, cx)); len(got) != 1 || got[0] != "one note per answer" {
			t.Fatalf("call %d of two notes: %q", i, got)
		}
	}
}

func TestRuleHistoryComplete(t *testing.T) {
	cx := meaningContext(t, nil, nil)
	if v := validate.Check(fnCall("send_note", `{}`), cx); !v.Valid() {
		t.Fatalf("complete history: %q", messages(v))
	}
	cx.HistoryUpstream = true
	if got := messages(validate.Check(fnCall("send_note", `{}`), cx)); len(got) != 1 || got[0] != "the whole conversation is needed" {
		t.Fatalf("history upstream: %q", got)
	}
}

// longHistory is a conversation of n get_order calls with their results
// (2n messages), the order of interest looked up last.
func longHistory(n int) *validate.History {
	h := &validate.History{}
	for i := n - 1; i >= 0; i-- {
		id := fmt.Sprintf("c%d", i)
		h.AddCall(id, "get_order", fmt.Appendf(nil, `{"order_id":"ord_%d"}`, i))
		h.AddResult(id, fmt.Sprintf(`{"order_id":"ord_%d","customer_id":"c_1","total_cents":4000,"refunded_cents":1500}`, i), false, nil)
	}
	return h
}

// A 500-message conversation is judged within the cost limit: both rules
// decide, over and under the balance.
func TestRulesLongHistoryWithinCostLimit(t *testing.T) {
	cx := meaningContext(t, longHistory(250), nil)
	if v := validate.Check(fnCall("issue_refund", `{"order_id":"ord_0","amount_cents":2500}`), cx); !v.Valid() {
		t.Fatalf("within the balance: %q", messages(v))
	}
	got := messages(validate.Check(fnCall("issue_refund", `{"order_id":"ord_0","amount_cents":2501}`), cx))
	if len(got) != 1 || got[0] != "amount exceeds the refundable balance" {
		t.Fatalf("over the balance: %q", got)
	}
}

// A rule that costs too much over a long history fails closed.
func TestRuleCostLimitFailsClosed(t *testing.T) {
	v := validate.Check(fnCall("heavy", `{}`), meaningContext(t, longHistory(2000), nil))
	if got := messages(v); len(got) != 1 || got[0] != "rule could not be evaluated: quadratic rule" {
		t.Fatalf("findings %q", got)
	}
	if v := validate.Check(fnCall("heavy", `{}`), meaningContext(t, longHistory(10), nil)); !v.Valid() {
		t.Fatalf("short history: %q", messages(v))
	}
}

// BenchmarkTwoRulesOver500Messages is the refund call's two history rules
// over a 500-message conversation, the history read once per request as
// in the proxy (its conversion is shared by every call of the request).
func BenchmarkTwoRulesOver500Messages(b *testing.B) {
	cx := meaningContext(b, longHistory(250), nil)
	c := fnCall("issue_refund", `{"order_id":"ord_0","amount_cents":2500}`)
	if v := validate.Check(c, cx); !v.Valid() {
		b.Fatalf("findings %q", messages(v))
	}
	b.ReportAllocs()
	for b.Loop() {
		validate.Check(c, cx)
	}
}
