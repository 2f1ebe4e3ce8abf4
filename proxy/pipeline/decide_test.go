package pipeline

import (
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/recovery"
)

// An escalating choice's message comes from its recorded escalation, in a
// copy: the verdict's own actions stay as Decide made them.
func TestActionsTakeMessagesFromEffects(t *testing.T) {
	pass := &recovery.Result{Outcome: recovery.Pass}
	esc := &recovery.Result{Outcome: recovery.Escalated, Escalation: &recovery.Escalation{ID: "esc_a"}}
	v := Decide([]*recovery.Result{pass, esc}, Policy{})
	e := &neutral.Escalated{ID: "esc_a", Text: "This step needs a person"}
	got := v.Actions(&Effects{Escalations: []*neutral.Escalated{e}})
	if got[1].Kind != neutral.Respond || got[1].Text != e.Text || got[1].Escalation != e {
		t.Errorf("escalating choice's action %+v", got[1])
	}
	if own := v.Actions(&Effects{}); own[1].Text != "" || own[1].Escalation != nil {
		t.Errorf("the verdict's own action was changed: %+v", own[1])
	}
}

// A held answer always answers as an error, whatever the mode, and lists
// the results to hold; shadow mode decides nothing.
func TestDecideHoldAndShadow(t *testing.T) {
	confirm := &recovery.Result{Outcome: recovery.Escalated, Escalation: &recovery.Escalation{ID: "esc_c",
		Label: "confirmation_required", Codes: []string{"confirmation_required"}}}
	results := []*recovery.Result{confirm}
	if !ConfirmOnly(results) {
		t.Fatal("a lone confirmation is not ConfirmOnly")
	}
	v := Decide(results, Policy{Hold: true})
	if !v.ErrorMode() || len(v.Held()) != 1 || len(v.Escalating()) != 1 {
		t.Errorf("held verdict: error mode %v, held %d, escalating %v", v.ErrorMode(), len(v.Held()), v.Escalating())
	}
	s := Decide(results, Policy{Shadow: true, Hold: true})
	if s.Outcome() != recovery.Escalated || s.Held() != nil || s.Escalating() != nil || s.Changed() {
		t.Errorf("shadow verdict %+v", s)
	}
}
