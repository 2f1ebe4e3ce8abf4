package mcp_test

import (
	"context"

	"errors"
	"github.com/toolgate/toolgate/internal/mcptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func elicitAnswer(action string, confirm bool) *mcp.ClientOptions {
	return &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		if !strings.Contains(req.Params.Message, "cancel_order") || !strings.Contains(req.Params.Message, "ord_9") {
			return nil, errors.New("the question does not name the call")
		}
		return &mcp.ElicitResult{Action: action, Content: map[string]any{"confirm": confirm}}, nil
	}}
}

func TestConfirmThroughElicitation(t *testing.T) {
	cases := []struct {
		name      string
		opts      *mcp.ClientOptions
		forwarded bool
		want      string
	}{
		{"yes", elicitAnswer("accept", true), true, "cancelled"},
		{"no", elicitAnswer("accept", false), false, "the person declined the call"},
		{"decline", elicitAnswer("decline", false), false, "the person declined the call"},
		{"cancel", elicitAnswer("cancel", true), false, "the person declined the call"},
		{"unsupported", nil, false, "did not declare the elicitation capability"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := start(t, false)
			g := startGate(t, o.HTTP.URL, mcptest.Catalog)
			cs, _ := connect(t, g.url, tc.opts)
			res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "ord_9"}})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(resultText(res), tc.want) || res.IsError == tc.forwarded {
				t.Fatalf("result %+v: %q", res, resultText(res))
			}
			if n := o.Cancels.Load(); (n == 1) != tc.forwarded {
				t.Fatalf("the tool ran %d times", n)
			}
			if tc.forwarded {
				// Counted once the handler returns, which may be just after
				// the client read the answer.
				waitFor(t, func() bool {
					return metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "confirmed"}) == 1
				})
				return
			}
			recs := g.sink.all()
			if len(recs) != 1 || recs[0].Escalation.Codes[0] != "confirmation_required" {
				t.Fatalf("sink records %+v", recs)
			}
		})
	}
}

func TestConfirmDestructiveAnnotation(t *testing.T) {
	o := start(t, false)
	g := startGate(t, o.HTTP.URL, "catalog: {mcp: {confirm_destructive: true}}\n")
	cs, _ := connect(t, g.url, nil)
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "ord_9"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || o.Cancels.Load() != 0 {
		t.Fatalf("a destructive tool ran unconfirmed: %+v", res)
	}
	res, err = cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_9", "amount_cents": 5}})
	if err != nil || res.IsError {
		t.Fatalf("a tool without the annotation was held: %v %+v", err, res)
	}
}

func TestConfirmTimeout(t *testing.T) {
	o := start(t, false)
	g := startGate(t, o.HTTP.URL, mcptest.Catalog+"  mcp: {confirm_timeout: 50ms}\n")
	release := make(chan struct{})
	defer close(release)
	cs, _ := connect(t, g.url, &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		<-release // a person who never answers
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}})
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "ord_9"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(resultText(res), "in time") || o.Cancels.Load() != 0 {
		t.Fatalf("result %+v", res)
	}
}

func TestOutputSchemaViolationReplaced(t *testing.T) {
	o := start(t, false)
	g := startGate(t, o.HTTP.URL, "")
	cs, _ := connect(t, g.url, nil)
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "count_items"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.StructuredContent != nil || !strings.Contains(resultText(res), "structuredContent/count") {
		t.Fatalf("result %+v %q", res, resultText(res))
	}
	if n := metric(t, g.reg, "toolgate_mcp_output_violations_total", map[string]string{"tool": "orders/count_items"}); n != 1 {
		t.Fatalf("output violations %v", n)
	}
}

func TestListChangedRefreshesTheCatalog(t *testing.T) {
	o := start(t, false)
	g := startGate(t, o.HTTP.URL, "")
	changed := make(chan struct{}, 4)
	cs, _ := connect(t, g.url, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	call := func() error {
		_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "track_parcel", Arguments: map[string]any{"parcel": "p1"}})
		return err
	}
	var werr *jsonrpc.Error
	if err := call(); !errors.As(err, &werr) || werr.Code != -32602 {
		t.Fatalf("a tool the server lacks: %v", err)
	}
	o.AddTracking()
	select {
	case <-changed:
	case <-time.After(15 * time.Second):
		t.Fatal("notifications/tools/list_changed never reached the client")
	}
	if err := call(); err != nil {
		t.Fatalf("after list_changed the new tool is still refused: %v", err)
	}
	versions := labelValues(t, g.reg, "toolgate_tool_calls_total", "catalog_version")
	if len(versions) != 2 || !strings.HasPrefix(versions[0], "mcp-") || !strings.HasPrefix(versions[1], "mcp-") {
		t.Fatalf("a changed tool list must be a new catalog version: %v", versions)
	}
}

func TestCancelWhileWaitingForAPerson(t *testing.T) {
	o := start(t, false)
	g := startGate(t, o.HTTP.URL, mcptest.Catalog)
	asked := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	cs, _ := connect(t, g.url, &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- struct{}{}
		<-release
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}})
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cancel_order", Arguments: map[string]any{"order_id": "ord_9"}})
		done <- err
	}()
	<-asked
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	// A later call goes through, and the held one never reached the server.
	// (Its notifications/cancelled may: when the client closes the stream
	// first, toolgate has already let the call go and forwards the
	// notification, which names an id the server never saw.)
	if _, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_1", "amount_cents": 5}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return o.Wire.Count("tools/call") == 1 })
	if o.Cancels.Load() != 0 || !strings.Contains(string(o.Wire.Body("tools/call")), "issue_refund") {
		t.Fatalf("the held call reached the server")
	}
}

func TestProgressNotificationsAndCancellation(t *testing.T) {
	o := start(t, false)
	g := startGate(t, o.HTTP.URL, "")
	progress := make(chan float64, 4)
	logs := make(chan string, 4)
	cs, _ := connect(t, g.url, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress <- r.Params.Progress },
		LoggingMessageHandler:       func(_ context.Context, r *mcp.LoggingMessageRequest) { logs <- string(r.Params.Level) },
	})
	if err := cs.SetLoggingLevel(ctxT(t), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "export_orders"}
		p.SetProgressToken("export-1")
		_, err := cs.CallTool(ctx, p)
		done <- err
	}()
	for _, want := range []float64{1, 2} {
		select {
		case got := <-progress:
			if got != want {
				t.Fatalf("progress %v, want %v", got, want)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no progress notification reached the client")
		}
	}
	select {
	case <-logs:
	case <-time.After(15 * time.Second):
		t.Fatal("the server's log message never reached the client")
	}
	cancel()
	select {
	case <-o.Cancelled:
	case <-time.After(15 * time.Second):
		t.Fatal("the cancellation never reached the server")
	}
	if err := <-done; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	waitFor(t, func() bool { return o.Wire.Count("notifications/cancelled") > 0 })
}

func TestSessionExpiryReachesTheClient(t *testing.T) {
	for _, listed := range []bool{false, true} {
		t.Run(map[bool]string{false: "toolgate lists", true: "client listed"}[listed], func(t *testing.T) {
			o := start(t, false)
			g := startGate(t, o.HTTP.URL, "")
			cs, _ := connect(t, g.url, nil, func(tr *mcp.StreamableClientTransport) { tr.DisableStandaloneSSE = true })
			if listed {
				if _, err := cs.ListTools(ctxT(t), nil); err != nil {
					t.Fatal(err)
				}
			}
			o.Forget() // the server forgets every session
			_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_1", "amount_cents": 5}})
			if !errors.Is(err, mcp.ErrSessionMissing) {
				t.Fatalf("want the SDK's session-missing error (a 404), got %v", err)
			}
		})
	}
}

func TestServerDownIsAJSONRPCError(t *testing.T) {
	o := start(t, false)
	g := startGate(t, o.HTTP.URL, "")
	// Without the server's own stream, which the SDK gives up on by itself
	// once the server is gone, the call is what meets the dead server.
	cs, _ := connect(t, g.url, nil, func(tr *mcp.StreamableClientTransport) { tr.DisableStandaloneSSE = true })
	if _, err := cs.ListTools(ctxT(t), nil); err != nil {
		t.Fatal(err)
	}
	o.HTTP.CloseClientConnections()
	o.HTTP.Close()
	_, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: "issue_refund", Arguments: map[string]any{"order_id": "ord_1", "amount_cents": 5}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -32000 || !strings.Contains(werr.Message, "could not be reached") {
		t.Fatalf("want a JSON-RPC error naming the server, got %v", err)
	}
	// The failure class is the model side's for an upstream it could not
	// use, and the request is counted under it.
	if string(werr.Data) != `{"code":"upstream_error"}` {
		t.Errorf("error data %s", werr.Data)
	}
	waitFor(t, func() bool {
		return metric(t, g.reg, "toolgate_requests_total", map[string]string{"api": "mcp", "outcome": "upstream_error"}) >= 1
	})

	// A client that starts while the server is down gets the same.
	c := mcp.NewClient(&mcp.Implementation{Name: "late", Version: "1"}, nil)
	_, err = c.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.url, MaxRetries: -1}, nil)
	if err == nil || !strings.Contains(err.Error(), "could not be reached") {
		t.Fatalf("connect to a dead server: %v", err)
	}
}
