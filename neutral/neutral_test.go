package neutral

import "testing"

// The first answer to a call counts; a later one cannot rewrite what the
// model was shown first.
func TestHistoryFirstResultCounts(t *testing.T) {
	var h History
	h.AddCall("c1", "get_order", []byte(`{}`))
	h.AddResult("c1", "first", false, nil)
	h.AddResult("c1", "second", true, nil)
	if r, ok := h.Result("c1"); !ok || r.Text != "first" || r.IsError {
		t.Fatalf("Result = %+v %v", r, ok)
	}
	if _, ok := h.Result("c2"); ok {
		t.Fatal("a result for a call never answered")
	}
	var none *History
	if _, ok := none.Result("c1"); ok {
		t.Fatal("a nil history has a result")
	}
}

// Only the user's side vouches, and a turn of only tool results keeps the
// last words the person wrote.
func TestAddUserTurn(t *testing.T) {
	var r Request
	r.AddUserTurn("refund ord_1", []string{`{"order":"ord_1"}`})
	r.AddUserTurn("", []string{"done"})
	if r.UserText != "refund ord_1" || len(r.Vouching) != 4 {
		t.Fatalf("UserText %q, Vouching %q", r.UserText, r.Vouching)
	}
}

func TestActionChangedAt(t *testing.T) {
	a := Action{Kind: Replace, Calls: make([]ToolCall, 2), Changed: []bool{false, true}}
	if a.ChangedAt(0) || !a.ChangedAt(1) || a.ChangedAt(2) || a.ChangedAt(-1) {
		t.Fatal("ChangedAt reads the wrong positions")
	}
	a.Kind = Respond
	if a.ChangedAt(1) {
		t.Fatal("a text answer replaces no call")
	}
	if (&Action{}).Touched() {
		t.Fatal("Keep touches the choice")
	}
}

func TestTurnTruncated(t *testing.T) {
	call := []ToolCall{{ID: "c1", Name: "f"}}
	for _, c := range []struct {
		stop  Stop
		calls []ToolCall
		want  bool
	}{
		{StopMaxTokens, call, true},
		{StopMaxTokens, nil, false},
		{StopEnd, call, false},
		{StopToolCalls, call, false},
		{StopOther, call, false},
		{StopUnknown, call, false},
	} {
		if got := (&Turn{Stop: c.stop, Calls: c.calls}).Truncated(); got != c.want {
			t.Errorf("stop %q with %d calls: Truncated() = %v, want %v", c.stop, len(c.calls), got, c.want)
		}
	}
}
