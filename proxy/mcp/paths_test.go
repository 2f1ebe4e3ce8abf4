package mcp_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/internal/mcptest"
)

// pathResult is how toolgate answered a spelling of an MCP prefix.
type pathResult int

const (
	servedByRoute pathResult = iota + 1 // judged by the MCP route
	refusedRPC                          // refused with a JSON-RPC error
)

// Every other spelling of an MCP server's path_prefix is either served by
// its MCP route, and so judged, or refused with a JSON-RPC error: it
// never passes through to the model upstream, whose pass-through owns
// every other path, and never reaches the MCP server unjudged.
func TestMCPPrefixSpellings(t *testing.T) {
	for _, mode := range []string{"enforce", "shadow"} {
		t.Run(mode, func(t *testing.T) {
			f := newFake(t)
			var modelHits atomic.Int32
			model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				modelHits.Add(1)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"model upstream"}]}}`)
			}))
			t.Cleanup(model.Close)
			g := startGate(t, f.srv.URL, "mode: "+mode+"\nupstreams: [{url: '"+model.URL+"'}]\n"+mcptest.Catalog)
			base := strings.TrimSuffix(g.url, "/mcp/orders")
			// The refund breaks the catalog's rule, so a judged call is
			// answered by toolgate and never forwarded.
			call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"issue_refund","arguments":{"amount_cents":200000}}}`
			canonical := map[string]bool{"/mcp/orders": true, "/mcp/order%73": true, "/%6dcp/orders": true}
			for _, p := range []string{
				"/mcp/orders", "/mcp/orders/", "/MCP/orders", "/mcp//orders", "/mcp/./orders", "/mcp/order%73",
				"/mcp/orders%2F", "/mcp/orders;x", "/mcp/orders/.", "/mcp/x/../orders", "/mcp/orders%2e", "/%6dcp/orders",
				"/mcp/Orders", "/mcp/orders%3Bx", "/mcp/orders%252F", "/mcp/orders%20", "/mcp/orders%00", "/mcp\\orders",
				"/mcp/%EF%BD%8Frders", "//mcp/orders",
			} {
				t.Run(p, func(t *testing.T) {
					status, body := postRaw(t, base, p, call)
					switch got := classify(body); {
					case got == servedByRoute:
					case canonical[p]:
						// Escapes of unreserved characters are the same
						// path to every server: judged, never refused.
						t.Errorf("HTTP %d %s: the route's own path was not served by it", status, body)
					case got == refusedRPC:
						if status != http.StatusBadRequest && status != http.StatusMethodNotAllowed {
							t.Errorf("refused with HTTP %d", status)
						}
					default:
						t.Errorf("HTTP %d %s: neither judged by the MCP route nor refused as JSON-RPC", status, body)
					}
				})
			}
			if n := modelHits.Load(); n != 0 {
				t.Errorf("the model upstream received %d MCP requests", n)
			}
			if n := f.calls(); n != 0 {
				t.Errorf("the MCP server received %d tools/call", n)
			}
		})
	}
}

// postRaw sends body to path exactly as written in the request line: no
// client library cleans, escapes or reads it as an authority.
func postRaw(t *testing.T, base, path, body string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", path, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// classify tells a judged answer (the rule's error result) from a
// JSON-RPC refusal.
func classify(body string) pathResult {
	var m struct {
		JSONRPC string `json:"jsonrpc"`
		Result  *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &m) != nil || m.JSONRPC != "2.0" {
		return 0
	}
	switch {
	case m.Result != nil && m.Result.IsError && len(m.Result.Content) == 1 &&
		strings.Contains(m.Result.Content[0].Text, "refunds above 1000.00 need a person"):
		return servedByRoute
	case m.Error != nil && m.Error.Code == -32600 && strings.Contains(m.Error.Message, "toolgate refused this request"):
		return refusedRPC
	}
	return 0
}
