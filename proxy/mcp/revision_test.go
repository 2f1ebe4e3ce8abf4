package mcp_test

import (
	"strings"
	"testing"
)

// A header naming the revision and a _meta naming another, unserved one
// disagree: that is a HeaderMismatch (400, -32020) before it is an
// unsupported revision, and the server never sees the request.
func TestRevisionMismatchBeforeUnsupported(t *testing.T) {
	o := startStateless(t, false, nil)
	g := startGate(t, o.HTTP.URL, "")
	for _, c := range []struct{ header, meta, code string }{
		{"2026-07-28", "v999.0.0", `"code":-32020`},
		{"v999.0.0", "2026-07-28", `"code":-32020`},
		{"v999.0.0", "v999.0.0", `"code":-32022`},
	} {
		status, _, out := post(t, g.url, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"`+c.meta+`","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			"Mcp-Protocol-Version", c.header, "Mcp-Method", "server/discover")
		if status != 400 || !strings.Contains(out, c.code) {
			t.Errorf("header %s, _meta %s: %d %s, want 400 and %s", c.header, c.meta, status, out, c.code)
		}
	}
	if n := o.Wire.Count("server/discover"); n != 0 {
		t.Fatalf("%d refused requests reached the server", n)
	}
}
