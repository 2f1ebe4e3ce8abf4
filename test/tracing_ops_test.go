package test

// Traces in operation: MCP calls, gRPC export, sampling, a client's
// malformed trace context, the log line and exemplars, a collector that
// is down or silent, and reloads.

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/cmd/toolgate/app"
	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/internal/otlptest"
	"github.com/toolgate/toolgate/internal/telemetry"
)

var chatWire = traceWires[0]

// traceparentFor is a sampled traceparent of a fresh trace.
func traceparentFor() (header, traceID, spanID string) {
	traceID, spanID = randomHex(16), randomHex(8)
	return "00-" + traceID + "-" + spanID + "-01", traceID, spanID
}

// headerTransport adds a traceparent to every request an SDK sends.
type headerTransport struct{ traceparent string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Traceparent", h.traceparent)
	return http.DefaultTransport.RoundTrip(r)
}

func TestTraceMCPCall(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	o := mcptest.Start(true)
	defer o.Close()
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams: [{url: 'http://127.0.0.1:1'}]\n" +
		"mcp_servers: [{name: orders, url: '" + o.HTTP.URL + "', path_prefix: /mcp/orders}]\n" + mcptest.Catalog +
		"tracing: {endpoint: '" + rcv.URL + "'}\n"
	g, _ := startGateWith(t, cfg, app.Options{Sink: &recordingSink{}, TraceTuning: telemetry.Tuning{Interval: 20 * time.Millisecond}})
	tp, traceID, _ := traceparentFor()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp/orders", DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: headerTransport{tp}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "issue_refund",
		Arguments: map[string]any{"order_id": "ord_1 " + markArgValue, "amount_cents": 500}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	// The judged call's span ends before the server span above it, and
	// the two may be exported in different batches: wait for both.
	spans := rcv.Wait(t, 5*time.Second, func(s []otlptest.Span) bool {
		judged, parent := judgedUnderServer(otlptest.Trace(s, traceID))
		return judged != nil && parent != nil
	})
	judged, parent := judgedUnderServer(otlptest.Trace(spans, traceID))
	if parent.Name != "mcp orders" || parent.Attr("toolgate.api") != "mcp" || parent.Attr("toolgate.outcome") != "pass" {
		t.Fatalf("judged call %+v under %+v", judged, parent)
	}
	if judged.Attr("gen_ai.tool.name") != "issue_refund" || judged.Attr("toolgate.valid") != "true" {
		t.Errorf("judged call attrs %v", judged.Attrs)
	}
	// The MCP server got the tools/call with the context of the server
	// span that judged and forwarded it.
	if o.Wire.Count("tools/call") != 1 {
		t.Fatalf("%d tools/call reached the server", o.Wire.Count("tools/call"))
	}
	for i, h := range o.Wire.Headers() {
		if v := h.Get("Traceparent"); !strings.HasPrefix(v, "00-"+traceID+"-") {
			t.Errorf("MCP server request %d traceparent %q", i, v)
		}
	}
	for _, raw := range rcv.Raw() {
		if strings.Contains(string(raw), markArgValue) {
			t.Error("an export carries an argument value")
		}
	}
}

// judgedUnderServer finds the judged call's span and the server span it
// is under; either is nil until exported.
func judgedUnderServer(spans []otlptest.Span) (judged, parent *otlptest.Span) {
	for i := range spans {
		if strings.HasPrefix(spans[i].Name, "judge_tool") {
			judged = &spans[i]
		}
	}
	if judged == nil {
		return nil, nil
	}
	for i := range spans {
		if spans[i].Kind == 2 && spans[i].SpanID == judged.ParentID {
			return judged, &spans[i]
		}
	}
	return judged, nil
}

func TestTraceOverGRPC(t *testing.T) {
	rcv := otlptest.NewGRPC(t)
	m := newMock(t, chatWire.calls(false, tracedWeather))
	v, _ := newValidator(t)
	g := tracedGate(t, m, v, "tracing: {endpoint: '"+rcv.Addr+"', protocol: grpc}\n")
	tp, traceID, _ := traceparentFor()
	if s := tracedPost(t, g.URL+chatWire.path(false), chatWire.request("hi", false), tp); s != 200 {
		t.Fatalf("status %d", s)
	}
	rcv.Wait(t, 5*time.Second, func(s []otlptest.Span) bool { return serverSpan(otlptest.Trace(s, traceID)) != nil })
}

// A trace toolgate starts is sampled at sample_ratio; a caller's sampled
// trace is continued whatever the ratio.
func TestTraceSamplingIsParentBased(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	m := newMockFunc(t, func(int, *mockRequest) mockReply { return chatWire.calls(false, tracedWeather) })
	v, _ := newValidator(t)
	g := tracedGate(t, m, v, "tracing: {endpoint: '"+rcv.URL+"', sample_ratio: 0}\n")
	for range 5 {
		if s := tracedPost(t, g.URL+chatWire.path(false), chatWire.request("hi", false), ""); s != 200 {
			t.Fatalf("status %d", s)
		}
	}
	// Unsampled, the upstream still learns the trace toolgate started,
	// flagged as not sampled.
	for _, r := range m.requests() {
		if tp := r.Header.Get("Traceparent"); !regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-00$`).MatchString(tp) {
			t.Errorf("unsampled request's traceparent %q", tp)
		}
	}
	tp, traceID, _ := traceparentFor()
	if s := tracedPost(t, g.URL+chatWire.path(false), chatWire.request("hi", false), tp); s != 200 {
		t.Fatalf("status %d", s)
	}
	spans := rcv.Wait(t, 5*time.Second, func(s []otlptest.Span) bool { return serverSpan(otlptest.Trace(s, traceID)) != nil })
	if n := len(otlptest.Trace(spans, traceID)); n != len(spans) {
		t.Errorf("%d spans exported, %d of them the sampled caller's: toolgate's own traces were sampled at ratio 0", len(spans), n)
	}
}

// A malformed or oversized traceparent starts a new trace; the request
// is served as any other.
func TestTraceMalformedTraceparentStartsANewTrace(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	m := newMockFunc(t, func(int, *mockRequest) mockReply { return chatWire.calls(false, tracedWeather) })
	v, _ := newValidator(t)
	g := tracedGate(t, m, v, "tracing: {endpoint: '"+rcv.URL+"'}\n")
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	bad := []string{
		"00-" + tid + "-00f067aa0ba902b7",
		"zz-" + tid + "-00f067aa0ba902b7-01",
		"00-" + tid + "-00f067aa0ba902b7-01-" + strings.Repeat("x", 8000),
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
	}
	for i, tp := range bad {
		if s := tracedPost(t, g.URL+chatWire.path(false), chatWire.request("hi", false), tp); s != 200 {
			t.Fatalf("traceparent %d: status %d", i, s)
		}
		got := m.requests()[i].Header.Get("Traceparent")
		if !regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`).MatchString(got) || strings.Contains(got, tid) {
			t.Errorf("traceparent %d: upstream got %q", i, got)
		}
	}
	spans := rcv.Wait(t, 5*time.Second, func(s []otlptest.Span) bool {
		n := 0
		for _, sp := range s {
			if sp.Kind == 2 {
				n++
			}
		}
		return n == len(bad)
	})
	for _, sp := range spans {
		if sp.Kind == 2 && (sp.ParentID != "" || sp.TraceID == tid) {
			t.Errorf("server span continued a malformed context: %+v", sp)
		}
	}
}

// The log line names the trace and the span; the latency histograms carry
// the trace id as an exemplar, which /metrics serves in OpenMetrics.
func TestTraceLogLineAndExemplars(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	m := newMock(t, chatWire.calls(false, tracedWeather))
	v, _ := newValidator(t)
	core, logs := observer.New(zap.InfoLevel)
	t.Setenv("TG_TRACE_KEY", markUpstreamKey)
	t.Setenv("TG_TRACE_HEADERS", "x-exporter-token="+markExporter)
	cfg := config(m, "api_key_env: TG_TRACE_KEY", catalogYAML(t, "mode: config")+
		"validators:\n  - {name: audit, url: '"+v.URL+"'}\ntracing: {endpoint: '"+rcv.URL+"', headers_env: TG_TRACE_HEADERS}\n")
	g, _ := startGateWith(t, cfg, app.Options{Sink: &recordingSink{}, Logger: zap.New(core),
		TraceTuning: telemetry.Tuning{Interval: 20 * time.Millisecond}})
	tp, traceID, _ := traceparentFor()
	if s := tracedPost(t, g.URL+chatWire.path(false), chatWire.request("hi", false), tp); s != 200 {
		t.Fatalf("status %d", s)
	}
	spans := rcv.Wait(t, 5*time.Second, func(s []otlptest.Span) bool { return serverSpan(otlptest.Trace(s, traceID)) != nil })
	srv := serverSpan(otlptest.Trace(spans, traceID))
	lines := logs.FilterMessage("request").All()
	if len(lines) != 1 {
		t.Fatalf("%d request log lines", len(lines))
	}
	f := lines[0].ContextMap()
	if f["trace_id"] != traceID || f["span_id"] != srv.SpanID {
		t.Errorf("log line trace_id %v span_id %v, want %s %s", f["trace_id"], f["span_id"], traceID, srv.SpanID)
	}
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if strings.Contains(toStr(v), markExporter) {
				t.Errorf("log %q field %s carries the exporter header", e.Message, k)
			}
		}
	}
	body := scrapeAs(t, g, "application/openmetrics-text;version=1.0.0")
	for _, metric := range []string{"toolgate_added_latency_seconds_bucket", "toolgate_upstream_duration_seconds_bucket", "toolgate_validator_duration_seconds_bucket"} {
		if !regexp.MustCompile(metric + `\{[^}]*\} \d+ # \{trace_id="` + traceID + `"\}`).MatchString(body) {
			t.Errorf("no %s exemplar with the trace id", metric)
		}
	}
	if plain := scrapeAs(t, g, "text/plain"); strings.Contains(plain, "trace_id") {
		t.Error("the text format carries exemplars")
	}
}

func toStr(v any) string {
	s, _ := v.(string)
	return s
}

func scrapeAs(t *testing.T, g *gate, accept string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+g.App.AdminAddr()+"/metrics", nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// silentCollector accepts connections and never answers.
func silentCollector(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// refusedAddr is a loopback port nothing listens on.
func refusedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestTraceCollectorDownOrSilent(t *testing.T) {
	for _, tc := range []struct{ name, tracing string }{
		{"refused http", "tracing: {endpoint: 'http://" + refusedAddr(t) + "'}\n"},
		{"refused grpc", "tracing: {endpoint: '" + refusedAddr(t) + "', protocol: grpc}\n"},
		{"silent http", "tracing: {endpoint: 'http://" + silentCollector(t) + "'}\n"},
		{"silent grpc", "tracing: {endpoint: '" + silentCollector(t) + "', protocol: grpc}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMockFunc(t, func(int, *mockRequest) mockReply { return chatWire.calls(false, tracedWeather) })
			v, _ := newValidator(t)
			t.Setenv("TG_TRACE_KEY", "k")
			cfg := config(m, "", catalogYAML(t, "mode: config")+"validators:\n  - {name: audit, url: '"+v.URL+"'}\n"+tc.tracing)
			// A small queue and a short export timeout, so that a few
			// hundred requests fill it while an export hangs.
			g, _ := startGateWith(t, cfg, app.Options{Sink: &recordingSink{}, TraceTuning: telemetry.Tuning{
				QueueSize: 16, BatchSize: 8, Interval: 10 * time.Millisecond, ExportTimeout: 4 * time.Second}})
			var slowest time.Duration
			for i := range 200 {
				start := time.Now()
				if s := tracedPost(t, g.URL+chatWire.path(false), chatWire.request("hi", false), ""); s != 200 {
					t.Fatalf("request %d: status %d", i, s)
				}
				slowest = max(slowest, time.Since(start))
			}
			// An export waits up to 4s; a request that waited on one
			// would take that long.
			if slowest > 2*time.Second {
				t.Errorf("slowest request %v", slowest)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !regexp.MustCompile(`(?m)^toolgate_trace_spans_dropped_total [1-9]`).MatchString(scrapeAs(t, g, "text/plain")) {
				if time.Now().After(deadline) {
					t.Fatal("no dropped spans counted")
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// Changing tracing on reload applies to the requests that start after
// it; a request in flight finishes, and its spans go where they began.
func TestTraceReload(t *testing.T) {
	rcvA, rcvB := otlptest.NewHTTP(t), otlptest.NewHTTP(t)
	hold := make(chan struct{})
	m := newMockFunc(t, func(n int, _ *mockRequest) mockReply {
		if n == 1 {
			<-hold
		}
		return chatWire.calls(false, tracedWeather)
	})
	v, _ := newValidator(t)
	g := tracedGate(t, m, v, "tracing: {endpoint: '"+rcvA.URL+"'}\n")
	apply := func(tracing string) {
		t.Helper()
		cfg, err := catalog.Parse([]byte(config(m, "api_key_env: TG_TRACE_KEY", catalogYAML(t, "mode: config")+
			"validators:\n  - {name: audit, url: '"+v.URL+"'}\n"+tracing)), "reload.yaml")
		if err != nil {
			t.Fatal(err)
		}
		snap, err := catalog.Compile(cfg, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if err := g.App.Server.Apply(snap); err != nil {
			t.Fatal(err)
		}
	}
	tp1, trace1, _ := traceparentFor()
	first := make(chan int, 1)
	go func() { first <- tracedPost(t, g.URL+chatWire.path(false), chatWire.request("hi", false), tp1) }()
	for wait := time.Now(); m.count() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Since(wait) > 10*time.Second {
			t.Fatal("the first request never reached the upstream")
		}
	}
	apply("tracing: {endpoint: '" + rcvB.URL + "'}\n")
	tp2, trace2, _ := traceparentFor()
	if s := tracedPost(t, g.URL+chatWire.path(false), chatWire.request("hi", false), tp2); s != 200 {
		t.Fatalf("status %d", s)
	}
	close(hold)
	if s := <-first; s != 200 {
		t.Fatalf("in-flight request: status %d", s)
	}
	rcvA.Wait(t, 5*time.Second, func(s []otlptest.Span) bool { return serverSpan(otlptest.Trace(s, trace1)) != nil })
	rcvB.Wait(t, 5*time.Second, func(s []otlptest.Span) bool { return serverSpan(otlptest.Trace(s, trace2)) != nil })
	if n := len(otlptest.Trace(rcvA.Spans(), trace2)) + len(otlptest.Trace(rcvB.Spans(), trace1)); n != 0 {
		t.Errorf("%d spans went to the other generation's collector", n)
	}

	apply("")
	tp3, _, _ := traceparentFor()
	before := len(rcvA.Spans()) + len(rcvB.Spans())
	if s := tracedPost(t, g.URL+chatWire.path(false), chatWire.request("hi", false), tp3); s != 200 {
		t.Fatalf("status %d", s)
	}
	if got := m.requests()[m.count()-1].Header.Get("Traceparent"); got != tp3 {
		t.Errorf("with tracing off the client's traceparent reached the upstream as %q, want it unchanged", got)
	}
	time.Sleep(200 * time.Millisecond)
	if after := len(rcvA.Spans()) + len(rcvB.Spans()); after != before {
		t.Errorf("%d spans exported with tracing off", after-before)
	}
}

// A pass-through route forwards the server span's context.
func TestTracePassThroughCarriesTheServerSpan(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	m := newMockFunc(t, func(int, *mockRequest) mockReply { return mockReply{Body: `{"object":"list","data":[]}`} })
	v, _ := newValidator(t)
	g := tracedGate(t, m, v, "tracing: {endpoint: '"+rcv.URL+"'}\n")
	tp, traceID, _ := traceparentFor()
	req, _ := http.NewRequest(http.MethodGet, g.URL+"/v1/models", nil)
	req.Header.Set("Traceparent", tp)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	spans := rcv.Wait(t, 5*time.Second, func(s []otlptest.Span) bool { return serverSpan(otlptest.Trace(s, traceID)) != nil })
	srv := serverSpan(otlptest.Trace(spans, traceID))
	if got := m.requests()[0].Header.Get("Traceparent"); got != "00-"+traceID+"-"+srv.SpanID+"-01" {
		t.Errorf("pass-through upstream got traceparent %q, want the server span's %s", got, srv.SpanID)
	}
	if srv.Attr("http.response.status_code") != "200" {
		t.Errorf("server span %v", srv.Attrs)
	}
}

// TestTraceApprovalID: the server spans of the request that held a confirm
// call and of the resume that released it both name the approval.
func TestTraceApprovalID(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	up := newRefundUpstream(t)
	cfg := refundConfig(up.srv.URL, "  store: memory\n", 100000, "operator") +
		"tracing: {endpoint: '" + rcv.URL + "'}\n"
	g := startApprovalGate(t, t.TempDir(), cfg)
	rt := routes[0]
	tk := hold(t, rt, g.url(), false)
	if st := g.decide(tk.ID, "approve"); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	if r := rt.send(t, g.url(), false, false, resumeWith(tk.ID)); r.status != http.StatusOK {
		t.Fatalf("resume: %d %v", r.status, r.err)
	}
	outcomes := func(s []otlptest.Span) map[string]string {
		got := map[string]string{}
		for _, sp := range s {
			if sp.Kind == 2 && sp.Attr("toolgate.approval_id") == tk.ID {
				got[sp.Attr("toolgate.outcome")] = sp.Attr("toolgate.escalation_id")
			}
		}
		return got
	}
	spans := rcv.Wait(t, 5*time.Second, func(s []otlptest.Span) bool { return len(outcomes(s)) == 2 })
	got := outcomes(spans)
	if _, ok := got["escalated"]; !ok {
		t.Errorf("no server span of the held request names approval %s: %v", tk.ID, got)
	}
	if esc, ok := got["approved"]; !ok || esc == "" || esc != got["escalated"] {
		t.Errorf("the resume's server span: %v, want outcome approved with the held escalation's id", got)
	}
}
