package openaichat

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
		{"stop", neutral.StopEnd},
		{"length", neutral.StopMaxTokens},
		{"tool_calls", neutral.StopToolCalls},
		{"content_filter", neutral.StopOther},
	} {
		if got := stopOf(c.reason); got != c.want {
			t.Errorf("stopOf(%q) = %q, want %q", c.reason, got, c.want)
		}
	}
}
