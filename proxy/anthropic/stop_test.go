package anthropic

import (
	"testing"

	"github.com/toolgate/toolgate/neutral"
)

func TestStopOf(t *testing.T) {
	for _, c := range []struct {
		reason string
		want   neutral.Stop
	}{
		{"", neutral.StopUnknown},
		{"end_turn", neutral.StopEnd},
		{"max_tokens", neutral.StopMaxTokens},
		{"tool_use", neutral.StopToolCalls},
		{"refusal", neutral.StopOther},
	} {
		if got := stopOf(c.reason); got != c.want {
			t.Errorf("stopOf(%q) = %q, want %q", c.reason, got, c.want)
		}
	}
}
