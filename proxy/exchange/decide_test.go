package exchange

import (
	"slices"
	"testing"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
)

// decideExchange is an exchange with only what decide may read: the mode,
// the settings and the request. Its server has no metrics, sink, logger or
// observer, so any effect decide had would panic.
func decideExchange(mode string) *exchange {
	return &exchange{env: &Env{}, gen: &pipeline.Generation{Snap: &catalog.Snapshot{Config: &catalog.Config{
		Escalation: catalog.Escalation{Mode: mode}}}}, parsed: parsedRequest{req: &neutral.Request{}}}
}

func escalating(id string) *recovery.Result {
	return &recovery.Result{Outcome: recovery.Escalated, Escalation: &recovery.Escalation{ID: id}}
}

// decide has no effects: it lists every escalating choice in both modes
// and leaves recording them, and their messages, to perform.
func TestDecideListsEveryEscalation(t *testing.T) {
	pass := &recovery.Result{Outcome: recovery.Pass}
	for _, mode := range []string{catalog.EscalationError, catalog.EscalationMessage} {
		t.Run(mode, func(t *testing.T) {
			x := decideExchange(mode)
			v := x.decide([]*recovery.Result{escalating("esc_a"), pass, escalating("esc_b")}, false)
			actions := v.Actions(&pipeline.Effects{})
			if !slices.Equal(v.Escalating(), []int{0, 2}) {
				t.Errorf("escalating %v, want [0 2]", v.Escalating())
			}
			if v.ErrorMode() != (mode == catalog.EscalationError) || v.Outcome() != recovery.Escalated || actions[0].Escalation != nil {
				t.Errorf("verdict %+v", v)
			}
			if actions[0].Kind != neutral.Respond || actions[1].Kind != neutral.Keep || actions[2].Kind != neutral.Respond {
				t.Errorf("actions %+v", actions)
			}
			if x.out.escalationID != "" {
				t.Errorf("decide set the escalation header %q", x.out.escalationID)
			}
		})
	}
}

// A retryable re-query failure is handed back whole: nothing of the
// answer is escalated, and the client's retry is judged afresh.
func TestDecideHandsBackUpstreamFailure(t *testing.T) {
	ue := &recovery.UpstreamError{Status: 503, Retryable: true}
	v := decideExchange(catalog.EscalationError).decide([]*recovery.Result{escalating("esc_a"),
		{Outcome: recovery.Escalated, Upstream: ue}}, false)
	if v.Upstream() != ue || len(v.Escalating()) != 0 || v.Actions(&pipeline.Effects{}) != nil {
		t.Errorf("verdict %+v", v)
	}
}
