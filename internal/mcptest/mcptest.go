// Package mcptest is the MCP server toolgate's tests stand toolgate in
// front of: a Go SDK server with order tools, behind a handler that
// records what reached it, so a test can tell a call toolgate refused from
// one the server refused.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Catalog is the config catalog the order tools are judged by in tests: a
// rule on refunds and a confirm policy on cancellation.
const Catalog = `catalog:
  tools:
    - name: orders/issue_refund
      rules:
        - expr: "args.amount_cents <= 100000"
          message: refunds above 1000.00 need a person
    - name: orders/cancel_order
      policy: confirm
`

// Wire records the requests an MCP server received and its answers. A
// request is recorded before it is served, so a client that has its answer
// finds it counted; its answer is complete only once the server returns,
// and Answer waits for that.
type Wire struct {
	mu      sync.Mutex
	methods []string
	bodies  [][]byte
	answers [][]byte
	served  []chan struct{}
	headers []http.Header
}

// Count is how many requests carried the JSON-RPC method (or HTTP method).
func (w *Wire) Count(method string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, x := range w.methods {
		if x == method {
			n++
		}
	}
	return n
}

// Answer is the server's answer to the first request carrying method.
func (w *Wire) Answer(method string) []byte {
	w.mu.Lock()
	i := w.index(method)
	if i < 0 {
		w.mu.Unlock()
		return nil
	}
	served := w.served[i]
	w.mu.Unlock()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.answers[i]
}

// Headers are the headers of every request the server received, in order.
func (w *Wire) Headers() []http.Header {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]http.Header(nil), w.headers...)
}

// Body is the first request body carrying method.
func (w *Wire) Body(method string) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i := w.index(method); i >= 0 {
		return w.bodies[i]
	}
	return nil
}

func (w *Wire) index(method string) int {
	for i, x := range w.methods {
		if x == method {
			return i
		}
	}
	return -1
}

// record adds a request about to be served and returns its place.
func (w *Wire) record(method string, body []byte, h http.Header) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.methods = append(w.methods, method)
	w.bodies = append(w.bodies, body)
	w.answers = append(w.answers, nil)
	w.served = append(w.served, make(chan struct{}))
	w.headers = append(w.headers, h)
	return len(w.methods) - 1
}

// answered stores the answer to the request at i.
func (w *Wire) answered(i int, answer []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.answers[i] = answer
	close(w.served[i])
}

type teeWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.buf.Write(p)
	return t.ResponseWriter.Write(p)
}
func (t *teeWriter) Flush()                      { _ = http.NewResponseController(t.ResponseWriter).Flush() }
func (t *teeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// Orders is the order tools' server, listening on loopback.
type Orders struct {
	Server *mcp.Server
	HTTP   *httptest.Server
	Wire   *Wire
	// Refunds and Cancels count the tool runs that changed something.
	Refunds, Cancels atomic.Int32
	// Cancelled receives once per long export the server saw cancelled,
	// and CancelledExports counts them.
	Cancelled        chan struct{}
	CancelledExports atomic.Int32

	mu        sync.Mutex
	h         http.Handler
	json      bool
	stateless bool
}

// Start serves the order tools over Streamable HTTP; jsonAnswers makes the
// server answer POSTs with JSON instead of SSE. Close stops it.
func Start(jsonAnswers bool) *Orders { return start(jsonAnswers, false, nil) }

// StartStateless serves the order tools as a stateless server does, the
// kind MCP 2026-07-28 is served by; cacheable, when set, decides the
// ttlMs and cacheScope of its lists.
func StartStateless(jsonAnswers bool, cacheable func(context.Context, mcp.Request, *mcp.Cacheable)) *Orders {
	return start(jsonAnswers, true, cacheable)
}

func start(jsonAnswers, stateless bool, cacheable func(context.Context, mcp.Request, *mcp.Cacheable)) *Orders {
	o := &Orders{Wire: &Wire{}, Cancelled: make(chan struct{}, 4), json: jsonAnswers, stateless: stateless}
	o.Server = mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, &mcp.ServerOptions{PageSize: 2, SetCacheable: cacheable})
	o.addTools()
	o.Forget()
	o.HTTP = httptest.NewServer(http.HandlerFunc(o.serve))
	return o
}

// Close stops the server.
func (o *Orders) Close() { o.HTTP.Close() }

func (o *Orders) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	method := r.Method
	var m struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &m) == nil && m.Method != "" {
		method = m.Method
	}
	tw := &teeWriter{ResponseWriter: w}
	o.mu.Lock()
	h := o.h
	o.mu.Unlock()
	i := o.Wire.record(method, body, r.Header.Clone())
	h.ServeHTTP(tw, r)
	o.Wire.answered(i, tw.buf.Bytes())
}

// Forget replaces the SDK's handler, which forgets every session: the next
// request of an old session gets a 404.
func (o *Orders) Forget() {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return o.Server }, &mcp.StreamableHTTPOptions{JSONResponse: o.json, Stateless: o.stateless})
	o.mu.Lock()
	o.h = h
	o.mu.Unlock()
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

func (o *Orders) addTools() {
	o.Server.AddTool(&mcp.Tool{Name: "lookup_order", Description: "Look an order up.",
		InputSchema:  schema(`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^ord_[0-9]+$"}},"required":["order_id"],"additionalProperties":false}`),
		OutputSchema: schema(`{"type":"object","properties":{"status":{"type":"string"}},"required":["status"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(`{"status":"shipped"}`), StructuredContent: map[string]any{"status": "shipped"}}, nil
		})
	o.Server.AddTool(&mcp.Tool{Name: "issue_refund", Description: "Refund an order.",
		InputSchema: schema(`{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer","minimum":1}},"required":["order_id","amount_cents"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			o.Refunds.Add(1)
			return &mcp.CallToolResult{Content: text("refunded")}, nil
		})
	destructive := true
	o.Server.AddTool(&mcp.Tool{Name: "cancel_order", Description: "Cancel an order for good.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive},
		InputSchema: schema(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			o.Cancels.Add(1)
			return &mcp.CallToolResult{Content: text("cancelled")}, nil
		})
	o.Server.AddTool(&mcp.Tool{Name: "count_items", Description: "Count an order's items (its result breaks its outputSchema).",
		InputSchema:  schema(`{"type":"object"}`),
		OutputSchema: schema(`{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text("many"), StructuredContent: map[string]any{"count": "many"}}, nil
		})
	o.Server.AddTool(&mcp.Tool{Name: "export_orders", Description: "A long export that reports progress until it is cancelled.",
		InputSchema: schema(`{"type":"object"}`)}, o.export)
	o.Server.AddTool(&mcp.Tool{Name: "cancelled_exports", Description: "How many exports the server saw cancelled.",
		InputSchema: schema(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(strconv.Itoa(int(o.CancelledExports.Load())))}, nil
		})
	o.Server.AddTool(&mcp.Tool{Name: "open_tracking", Description: "Adds the track_parcel tool.",
		InputSchema: schema(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			o.AddTracking()
			return &mcp.CallToolResult{Content: text("tracking open")}, nil
		})
	o.Server.AddTool(&mcp.Tool{Name: "end_sessions", Description: "Forgets every session once this call is answered.",
		InputSchema: schema(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			o.Forget()
			return &mcp.CallToolResult{Content: text("sessions ended")}, nil
		})
}

// AddTracking adds track_parcel, so the server tells its sessions that its
// tool list changed.
func (o *Orders) AddTracking() {
	o.Server.AddTool(&mcp.Tool{Name: "track_parcel", InputSchema: schema(`{"type":"object","properties":{"parcel":{"type":"string"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text("in transit")}, nil
		})
}

func (o *Orders) export(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	tok := req.Params.GetProgressToken()
	for i := 1; i <= 2; i++ {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 10, Message: "exporting"})
	}
	_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "export running"})
	<-ctx.Done()
	o.CancelledExports.Add(1)
	select {
	case o.Cancelled <- struct{}{}:
	default:
	}
	return nil, ctx.Err()
}
