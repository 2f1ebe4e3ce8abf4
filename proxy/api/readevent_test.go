package api_test

import (
	"errors"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
)

// TestReadEvent: a key folding onto a protocol key is refused in an event
// read whole, in one read against the last event that differs from it in
// that key alone, and in one that is not JSON; an event that differs from
// the last in a value alone keeps its keys.
func TestReadEvent(t *testing.T) {
	last := new(jsonx.Text)
	for _, c := range []struct {
		data           string
		read, sameKeys bool
		err            error
	}{
		{`{"type":"delta","delta":{"text":"a"}}`, true, false, nil},
		{`{"type":"delta","delta":{"text":"bc"}}`, true, true, nil},
		{`{"type":"delta","delta":{"tExt":"bc"}}`, true, false, api.ErrFoldedKey},
		{`{"type":"delta","delta":{"zext":"bc"}}`, true, false, nil},
		{`{"Type":"delta"`, false, false, api.ErrFoldedKey},
		{`{"type":"delta"`, false, false, nil},
	} {
		tx := jsonx.GetText()
		read, sameKeys, err := api.ReadEvent(tx, last, []byte(c.data))
		if read != c.read || sameKeys != c.sameKeys || !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Errorf("%s: read %v, same keys %v, %v; want %v, %v, %v", c.data, read, sameKeys, err, c.read, c.sameKeys, c.err)
		}
		if read && err == nil {
			last.Keep(tx)
		}
		tx.Release()
	}
}
