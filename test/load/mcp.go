package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP scenarios send valid tools/call requests of one tool to an MCP
// server of the Go SDK that the mock serves beside its model route, with
// JSON answers: at mcpSessionPath a server with sessions (2025-11-25:
// each worker initializes once, then calls in its session), at
// mcpStatelessPath a stateless one (2026-07-28: every call stands alone,
// no initialize). toolgate mounts each at the same path, so every target
// is reached at base+path; toolgate judges each call against the server's
// tools/list, which it reads itself.

const (
	mcpSessionPath   = "/mcp/session"
	mcpStatelessPath = "/mcp/stateless"
	// mcpSession and mcpStateless are scenario.MCP values.
	mcpSession   = "session"
	mcpStateless = "stateless"
)

// mcpTool is the tool every call names, with the fixture's kind of
// schema: a pattern, an enum, a bound, nothing else allowed.
const mcpTool = "lookup_order"

var mcpSchema = json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^ord_[0-9]+$"},` +
	`"fields":{"type":"array","items":{"type":"string","enum":["status","total","items"]},"maxItems":3},` +
	`"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["order_id"],"additionalProperties":false}`)

const mcpArgs = `{"order_id":"ord_4711","fields":["status","total"],"limit":10}`

// mcpWant is in every valid answer: the tool's structured result.
var mcpWant = []byte(`"structuredContent":{"status":"shipped","total":4200}`)

// mcpHandler serves both MCP servers.
func mcpHandler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "load", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: mcpTool, Description: "Look an order up.", InputSchema: mcpSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"shipped","total":4200}`}},
				StructuredContent: map[string]any{"status": "shipped", "total": 4200}}, nil
		})
	get := func(*http.Request) *mcp.Server { return srv }
	// nginx names its upstream block in Host; the mock is on loopback only.
	opts := func(stateless bool) *mcp.StreamableHTTPOptions {
		return &mcp.StreamableHTTPOptions{JSONResponse: true, Stateless: stateless, DisableLocalhostProtection: true}
	}
	mux := http.NewServeMux()
	mux.Handle(mcpSessionPath, mcp.NewStreamableHTTPHandler(get, opts(false)))
	mux.Handle(mcpStatelessPath, mcp.NewStreamableHTTPHandler(get, opts(true)))
	return mux
}

// mcpServersYAML mounts both servers in toolgate at the mock's paths.
func mcpServersYAML(mockURL string) string {
	return "mcp_servers:\n" +
		"  - {name: loadsession, url: " + mockURL + mcpSessionPath + ", path_prefix: " + mcpSessionPath + "}\n" +
		"  - {name: loadstateless, url: " + mockURL + mcpStatelessPath + ", path_prefix: " + mcpStatelessPath + "}\n"
}

// mcpWorker is one closed-loop worker's MCP client: its session, once
// initialized.
type mcpWorker struct {
	session string
}

const mcpRevision2025 = "2025-11-25"

// post sends one JSON-RPC message and reads the whole answer.
func (d *driver) mcpPost(ctx context.Context, url, body string, h map[string]string) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// initialize opens the worker's 2025-11-25 session.
func (w *mcpWorker) initialize(ctx context.Context, d *driver, url string) bool {
	resp, _, err := d.mcpPost(ctx, url, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mcpRevision2025+
		`","capabilities":{},"clientInfo":{"name":"load","version":"1"}}}`, nil)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		return false
	}
	w.session = resp.Header.Get("Mcp-Session-Id")
	h := map[string]string{"Mcp-Session-Id": w.session, "Mcp-Protocol-Version": mcpRevision2025}
	resp, _, err = d.mcpPost(ctx, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	return err == nil && resp.StatusCode == http.StatusAccepted
}

// mcpCallBody is the tools/call every request sends.
var (
	mcpCallSession   = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + mcpTool + `","arguments":` + mcpArgs + `}}`
	mcpCallStateless = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + mcpTool + `","arguments":` + mcpArgs +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
)

// one sends one tools/call, opening the session first (untimed) when
// the scenario has sessions and the worker has none yet.
func (w *mcpWorker) one(ctx context.Context, d *driver, base string, sc scenario) sample {
	var url, body string
	var h map[string]string
	if sc.MCP == mcpSession {
		url, body = base+mcpSessionPath, mcpCallSession
		if w.session == "" && !w.initialize(ctx, d, url) {
			return sample{out: failed}
		}
		h = map[string]string{"Mcp-Session-Id": w.session, "Mcp-Protocol-Version": mcpRevision2025}
	} else {
		url, body = base+mcpStatelessPath, mcpCallStateless
		h = map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": mcpTool}
	}
	start := time.Now()
	resp, got, err := d.mcpPost(ctx, url, body, h)
	s := sample{lat: time.Since(start)}
	switch {
	case err != nil && resp == nil:
		s.out = failed
	case err != nil:
		s.out = truncated
	case resp.StatusCode != http.StatusOK || bytes.Contains(got, []byte(`"error"`)) || bytes.Contains(got, []byte(`"isError":true`)):
		s.out = failed
	case bytes.Contains(got, mcpWant):
		s.out = okExact
	default:
		s.out = corrupted
	}
	return s
}

// withMCP serves the MCP servers under /mcp/ and the rest with next.
func withMCP(next http.Handler) http.Handler {
	m := mcpHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/mcp/") {
			m.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
