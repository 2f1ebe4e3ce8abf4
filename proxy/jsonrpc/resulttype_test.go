package jsonrpc

import (
	"strings"
	"testing"
)

const call2026 = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"issue_refund","arguments":{"amount_cents":5},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

// A result toolgate answers a 2026-07-28 call with says it is complete, as
// that revision requires of every result; one answering an earlier
// revision's call has no resultType, as before.
func TestResultType(t *testing.T) {
	for _, c := range []struct {
		body, want string
		has        bool
	}{{call2026, `"resultType":"complete"`, true}, {call, `"resultType"`, false}} {
		refused := string(decode(t, c.body).Refusal(escalated()))
		if strings.Contains(refused, c.want) != c.has {
			t.Errorf("refusal of %s: %s", c.body, refused)
		}
	}
	// A withheld result keeps the server's resultType.
	out := string(Withheld([]byte(`{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","content":[],"structuredContent":{}}}`), "t", nil, nil))
	if !strings.Contains(out, `"resultType":"complete"`) || !strings.Contains(out, `"isError":true`) {
		t.Errorf("withheld: %s", out)
	}
	out = string(Withheld([]byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`), "t", nil, nil))
	if strings.Contains(out, `"resultType"`) {
		t.Errorf("withheld 2025 result: %s", out)
	}
}
