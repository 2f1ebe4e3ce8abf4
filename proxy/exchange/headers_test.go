package exchange

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"testing/iotest"
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
		x := &account{usage: usage}
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

// readAll must read exactly what io.ReadAll reads, whatever the length the
// body declared.
func TestReadAll(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 300)
	for _, hint := range []int64{-1, 0, 1, 512, 2999, 3000, 3001, 1 << 30} {
		for _, chunk := range []int{1, 7, 4096} {
			got, err := readAll(&chunkReader{b: body, n: chunk}, hint)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("hint %d chunk %d: %d bytes, %v", hint, chunk, len(got), err)
			}
		}
	}
	boom := errors.New("boom")
	if _, err := readAll(iotest.ErrReader(boom), 10); !errors.Is(err, boom) {
		t.Fatalf("error not passed on: %v", err)
	}
}

type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.n, len(c.b))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}
