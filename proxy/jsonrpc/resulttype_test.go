package jsonrpc

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/neutral"
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
		codec, a := decode(t, c.body)
		refused := string(codec.EncodeEscalation(escalated()))
		answered, err := codec.EncodeAnswer(a, []neutral.Action{{Kind: neutral.Respond, Text: "no"}})
		if err != nil {
			t.Fatal(err)
		}
		for what, out := range map[string]string{"refusal": refused, "answer": string(answered)} {
			if strings.Contains(out, c.want) != c.has {
				t.Errorf("%s of %s: %s", what, c.body, out)
			}
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
