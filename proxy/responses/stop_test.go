package responses

import (
	"testing"

	"github.com/toolgate/toolgate/neutral"
)

func TestWireHeadStop(t *testing.T) {
	incomplete := func(reason string) wireHead {
		h := wireHead{Status: "incomplete"}
		h.IncompleteDetails = &struct {
			Reason string `json:"reason"`
		}{reason}
		return h
	}
	for _, c := range []struct {
		h    wireHead
		want neutral.Stop
	}{
		{wireHead{}, neutral.StopUnknown},
		{wireHead{Status: "completed"}, neutral.StopEnd},
		{incomplete("max_output_tokens"), neutral.StopMaxTokens},
		{incomplete("content_filter"), neutral.StopOther},
		{wireHead{Status: "incomplete"}, neutral.StopOther},
		{wireHead{Status: "failed"}, neutral.StopOther},
	} {
		if got := c.h.stop(); got != c.want {
			t.Errorf("status %q: stop() = %q, want %q", c.h.Status, got, c.want)
		}
	}
}
