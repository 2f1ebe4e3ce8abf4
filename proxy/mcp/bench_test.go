package mcp_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcptest"
)

// BenchmarkMCPCall is one valid tools/call from the Go SDK through
// toolgate to a server answering in JSON: on a 2025-11-25 session, and on
// 2026-07-28 with the server's list kept for an hour.
func BenchmarkMCPCall(b *testing.B) {
	for _, c := range []struct {
		name string
		o    *mcptest.Orders
		opts *mcp.ClientSessionOptions
	}{
		{"2025-11-25", mcptest.Start(true), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}},
		{"2026-07-28", mcptest.StartStateless(true, func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs = 3600000 }), nil},
	} {
		b.Cleanup(c.o.Close)
		b.Run(c.name, func(b *testing.B) {
			g := startGate(b, c.o.HTTP.URL, mcptest.Catalog)
			cs := connectWith(b, g.url, c.opts)
			ctx := ctxT(b)
			p := &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": "ord_1"}}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if res, err := cs.CallTool(ctx, p); err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
		})
	}
}

func connectWith(b *testing.B, url string, opts *mcp.ClientSessionOptions) *mcp.ClientSession {
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(ctxT(b), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1, DisableStandaloneSSE: true}, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}
