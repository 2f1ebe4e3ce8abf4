// Package otlptest is an in-process OTLP trace receiver for tests: it
// takes exports over http/protobuf or gRPC, decodes the wire format with
// the OTLP protobuf types, and keeps every span and every raw body.
package otlptest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, its ids in hex.
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      tracepb.Span_SpanKind
	Attrs                     map[string]any
	StatusError               bool
	Service                   string
	Start, End                time.Time
}

// Attr returns the attribute as a string, or "" when absent.
func (s Span) Attr(k string) string {
	switch v := s.Attrs[k].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return toString(v)
	}
}

// Receiver collects what toolgate exports.
type Receiver struct {
	// URL is the http/protobuf endpoint (http://HOST:PORT), or "".
	URL string
	// Addr is the gRPC endpoint (HOST:PORT), or "".
	Addr string

	mu    sync.Mutex
	spans []Span
	raw   [][]byte
}

// NewHTTP starts an http/protobuf receiver on loopback for t.
func NewHTTP(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP protobuf trace export", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		var msg coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(body, &msg)
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// NewGRPC starts a gRPC receiver on loopback for t.
func NewGRPC(t testing.TB) *Receiver {
	r := &Receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(s, grpcService{r: r})
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	r.Addr = ln.Addr().String()
	return r
}

type grpcService struct {
	coltrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	body, _ := proto.Marshal(req)
	g.r.add(body, req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) add(body []byte, msg *coltrace.ExportTraceServiceRequest) {
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				got = append(got, decode(sp, service))
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raw = append(r.raw, body)
	r.spans = append(r.spans, got...)
}

func decode(sp *tracepb.Span, service string) Span {
	s := Span{TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
		Name: sp.GetName(), Kind: sp.GetKind(), Attrs: map[string]any{}, Service: service,
		StatusError: sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
		Start:       time.Unix(0, int64(sp.GetStartTimeUnixNano())), End: time.Unix(0, int64(sp.GetEndTimeUnixNano()))}
	if p := sp.GetParentSpanId(); len(p) > 0 {
		s.ParentID = hex.EncodeToString(p)
	}
	for _, kv := range sp.GetAttributes() {
		s.Attrs[kv.GetKey()] = value(kv.GetValue())
	}
	return s
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		var out []string
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, toString(value(e)))
		}
		return out
	}
	return nil
}

// Spans are every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Raw are the export bodies received so far, as sent.
func (r *Receiver) Raw() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.raw)
}

// Wait polls until done holds for the spans received, or fails t.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := r.Spans()
		if done(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans not there after %v; got %d: %v", timeout, len(s), names(s))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Trace is the spans of one trace.
func Trace(spans []Span, traceID string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

func names(spans []Span) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}
