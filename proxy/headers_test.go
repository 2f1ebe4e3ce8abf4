package proxy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/recovery"
)

func TestMillis(t *testing.T) {
	cases := map[time.Duration]string{
		0:                           "0.000",
		999 * time.Nanosecond:       "0.000",
		42 * time.Microsecond:       "0.042",
		1500 * time.Microsecond:     "1.500",
		12345678 * time.Microsecond: "12345.678",
	}
	for d, want := range cases {
		if got := millis(d); got != want {
			t.Errorf("millis(%v) = %q, want %q", d, got, want)
		}
	}
}

// usageJSON is written by hand for speed; encoding/json of the same values
// is the reference.
func TestUsageJSON(t *testing.T) {
	for _, usage := range [][]usageEntry{
		nil,
		{{Kind: recovery.KindOriginal, Input: 12, Output: 3}},
		{{Kind: recovery.KindOriginal, Input: 1 << 40, Output: 0}, {Kind: "re\"query", Input: 7, Output: -1}},
	} {
		x := &exchange{usage: usage}
		var in, out int64
		for _, u := range usage {
			in += u.Input
			out += u.Output
		}
		calls := usage
		if calls == nil {
			calls = []usageEntry{}
		}
		want, _ := json.Marshal(struct {
			Input  int64        `json:"input_tokens"`
			Output int64        `json:"output_tokens"`
			Calls  []usageEntry `json:"calls"`
		}{in, out, calls})
		if got := x.usageJSON(); got != string(want) {
			t.Errorf("usageJSON() = %s\nwant          %s", got, want)
		}
	}
}
