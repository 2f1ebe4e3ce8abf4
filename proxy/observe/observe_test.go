package observe

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/route"
	"github.com/toolgate/toolgate/proxy/upstream"
)

// An MCP request's trace context in params._meta is read, and the body is
// still the route's to read whole; a body over the limit is not looked
// into.
func TestMetaTrace(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"traceparent":"` + tp + `","tracestate":"k=v"}}}`
	for _, tc := range []struct {
		name      string
		limit     int64
		wantTrace string
	}{
		{"within the limit", int64(len(body)), tp},
		{"over the limit", int64(len(body)) - 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
			h := metaTrace(r, tc.limit)
			if got := h.Get("traceparent"); got != tc.wantTrace {
				t.Errorf("traceparent %q, want %q", got, tc.wantTrace)
			}
			if tc.wantTrace != "" && h.Get("tracestate") != "k=v" {
				t.Errorf("tracestate %q", h.Get("tracestate"))
			}
			rest, err := io.ReadAll(r.Body)
			if err != nil || string(rest) != body {
				t.Errorf("the route reads %q (%v), want the whole body", rest, err)
			}
		})
	}
}

// An upstream call's span carries the status the upstream answered and
// ends with the call's body; a call that got no answer ends it at once
// with the failure's class as its status.
func TestUpstreamSent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")

	_, sp := tr.Start(context.Background(), "failed")
	UpstreamSent(sp, nil, neutral.CodeUpstreamTimeout)
	ended := rec.Ended()
	if len(ended) != 1 || ended[0].Status().Code != codes.Error || ended[0].Status().Description != string(neutral.CodeUpstreamTimeout) {
		t.Fatalf("a failed call's span: %+v", ended)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	u, err := upstream.New(catalog.Upstream{Name: "mock", URL: srv.URL}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.Close)
	c, err := u.Do(context.Background(), http.MethodPost, "/v1/chat/completions", "", http.Header{}, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_, sp = tr.Start(context.Background(), "answered")
	UpstreamSent(sp, c, "")
	if n := len(rec.Ended()); n != 1 {
		t.Fatalf("the span ended before the call's body was done (%d ended)", n)
	}
	c.Close()
	ended = rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans ended, want the answered call's too", len(ended))
	}
	s := ended[1]
	if s.Status().Code != codes.Error || !hasAttr(s.Attributes(), attribute.Int("http.response.status_code", 503)) {
		t.Errorf("an answered call's span: status %+v attributes %v", s.Status(), s.Attributes())
	}

	UpstreamSent(nil, nil, neutral.CodeUpstream) // untraced: nothing to record, no panic
}

func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == want {
			return true
		}
	}
	return false
}

// The series a route resolves ahead are the ones its requests count in;
// the pass outcome's series appears only once a request passed. The
// catalog's and the refusals' series exist at zero from the start.
func TestAPISeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.SetCatalog("v1", []string{"get_weather"}, []string{"chat", "messages"})
	for _, api := range []string{"chat", "messages"} {
		if v := testutil.ToFloat64(m.ToolCalls.WithLabelValues(api, "v1", "get_weather", "valid")); v != 0 {
			t.Errorf("%s: tool series at %v", api, v)
		}
	}
	if n := testutil.CollectAndCount(m.ToolCalls); n != 4 {
		t.Errorf("%d tool call series, want 2 per API", n)
	}
	if n := testutil.CollectAndCount(m.RouteRefusals); n != len(route.Reasons()) {
		t.Errorf("%d refusal series, want one per reason (%d)", n, len(route.Reasons()))
	}

	s := m.ForAPI("chat")
	if n := testutil.CollectAndCount(m.Requests); n != 0 {
		t.Fatalf("%d request series before any request", n)
	}
	s.Requests("pass").Inc()
	s.Requests("pass").Inc()
	s.Requests("escalated").Inc()
	if v := testutil.ToFloat64(m.Requests.WithLabelValues("chat", "pass")); v != 2 {
		t.Errorf("pass counted %v times, want 2", v)
	}
	if v := testutil.ToFloat64(m.Requests.WithLabelValues("chat", "escalated")); v != 1 {
		t.Errorf("escalated counted %v times, want 1", v)
	}

	s.UpstreamDuration(neutral.KindOriginal).Observe(1)
	s.UpstreamDuration("correction").Observe(2)
	in, out := s.Tokens("correction")
	in.Add(3)
	out.Add(4)
	if v := testutil.ToFloat64(m.UpstreamTokens.WithLabelValues("chat", "correction", "output")); v != 4 {
		t.Errorf("re-query output tokens %v, want 4", v)
	}
	if n := testutil.CollectAndCount(m.UpstreamDuration); n != 2 {
		t.Errorf("%d upstream duration series, want original and correction", n)
	}
}
