package test

// Traces end to end (SPEC §8a): toolgate exports to an in-process OTLP
// receiver that decodes the wire format; every API, whole and streamed,
// passed, reprompted, recovered and escalated, continued from the client's
// traceparent and passed on to the upstream and a validator.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/cmd/toolgate/app"
	"github.com/toolgate/toolgate/internal/otlptest"
	"github.com/toolgate/toolgate/internal/telemetry"
)

// Secret markers: none may appear anywhere in what is exported.
const (
	markUserText    = "MARK-USER-TEXT-7f3a"
	markArgValue    = "MARK-ARG-VALUE-7f3a"
	markClientKey   = "MARK-CLIENT-KEY-7f3a"
	markUpstreamKey = "MARK-UPSTREAM-KEY-7f3a"
	markHeader      = "MARK-HEADER-VALUE-7f3a"
	markContext     = "MARK-CONTEXT-VALUE-7f3a"
	markExporter    = "MARK-EXPORTER-HEADER-7f3a"
)

var traceMarkers = []string{markUserText, markArgValue, markClientKey, markUpstreamKey, markHeader, markContext, markExporter}

var (
	tracedWeather = call{"call_weather", "get_current_weather", `{"location":"Boston ` + markArgValue + `","unit":"celsius"}`}
	tracedBadUnit = call{"call_badunit", "get_current_weather", `{"location":"Boston ` + markArgValue + `","unit":"kelvin"}`}
	tracedInvent  = call{"call_invented", "fetch_weather_report", `{"city":"` + markArgValue + `"}`}
)

type traceScenario struct {
	name    string
	replies func(w traceWire, stream bool) []mockReply
	outcome string
	status  int
	// kinds are the upstream calls' toolgate.upstream.kind in order.
	kinds []string
	// judged are the judged calls' tool names; validated those that
	// reached the validator.
	judged    []string
	validated int
}

var traceScenarios = []traceScenario{
	{name: "passed", outcome: "pass", status: 200, kinds: []string{"original"},
		judged: []string{"get_current_weather"}, validated: 1,
		replies: func(w traceWire, s bool) []mockReply { return []mockReply{w.calls(s, tracedWeather)} }},
	{name: "reprompted", outcome: "reprompted", status: 200, kinds: []string{"original", "reprompt"},
		judged: []string{"get_current_weather", "get_current_weather"}, validated: 1,
		replies: func(w traceWire, s bool) []mockReply {
			return []mockReply{w.calls(s, tracedBadUnit), w.calls(false, tracedWeather)}
		}},
	{name: "recovered", outcome: "substituted", status: 200, kinds: []string{"original", "recovery"},
		judged: []string{"fetch_weather_report", "get_current_weather"}, validated: 1,
		replies: func(w traceWire, s bool) []mockReply {
			d := substitute("get_current_weather", tracedWeather.Args, 0.95)
			return []mockReply{w.calls(s, tracedInvent), w.text(decisionText(d))}
		}},
	{name: "escalated", outcome: "escalated", status: 422, kinds: []string{"original", "recovery"},
		judged: []string{"fetch_weather_report"}, validated: 0,
		replies: func(w traceWire, s bool) []mockReply {
			d := escalate("no tool reports weather like that", "weather report", "weather reports", 0.9)
			return []mockReply{w.calls(s, tracedInvent), w.text(decisionText(d))}
		}},
}

// decisionText takes the decision out of a chat answer built by the
// harness, to put it in another API's text answer.
func decisionText(r mockReply) string {
	var a struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	mustUnmarshal(r.Body, &a)
	return a.Choices[0].Message.Content
}

// recorder is a server that records the traceparent of what it receives.
type recorder struct {
	mu     sync.Mutex
	parent []string
}

func (r *recorder) note(h http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.parent = append(r.parent, h.Get("Traceparent"))
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.parent)
}

func newValidator(t *testing.T) (*httptest.Server, *recorder) {
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.note(r.Header)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte(`{"allowed":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv, rec
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tracedGate starts toolgate exporting to r, with m as its upstream and v
// as its validator.
func tracedGate(t *testing.T, m *mockUpstream, v *httptest.Server, tracing string) *gate {
	t.Setenv("TG_TRACE_KEY", markUpstreamKey)
	t.Setenv("TG_TRACE_HEADERS", "x-exporter-token="+markExporter)
	cfg := config(m, "api_key_env: TG_TRACE_KEY\napi_key_mode: replace",
		catalogYAML(t, "mode: config\ncontext: {customer_id: {header: X-Customer-Id}}")+
			"validators:\n  - {name: audit, url: '"+v.URL+"'}\n"+tracing)
	g, _ := startGateWith(t, cfg, app.Options{Sink: &recordingSink{}, TraceTuning: telemetry.Tuning{Interval: 20 * time.Millisecond}})
	return g
}

// tracedPost sends body with the secret-carrying headers and a
// traceparent of traceID, and returns the status.
func tracedPost(t *testing.T, url, body, traceparent string) int {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+markClientKey)
	req.Header.Set("X-Custom-Header", markHeader)
	req.Header.Set("X-Customer-Id", markContext)
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
		req.Header.Set("Tracestate", "vendor=abc")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	return resp.StatusCode
}

func TestTraceSpanTreeEveryAPI(t *testing.T) {
	rcv := otlptest.NewHTTP(t)
	for _, w := range traceWires {
		for _, stream := range []bool{false, true} {
			for _, sc := range traceScenarios {
				name := w.name + "/" + map[bool]string{false: "whole", true: "stream"}[stream] + "/" + sc.name
				t.Run(name, func(t *testing.T) {
					m := newMock(t, sc.replies(w, stream)...)
					v, vrec := newValidator(t)
					g := tracedGate(t, m, v, "tracing: {endpoint: '"+rcv.URL+"', headers_env: TG_TRACE_HEADERS}\n")
					traceID, clientSpan := randomHex(16), randomHex(8)
					status := tracedPost(t, g.URL+w.path(stream), w.request("What is the weather? "+markUserText, stream),
						"00-"+traceID+"-"+clientSpan+"-01")
					if status != sc.status {
						t.Fatalf("status %d, want %d", status, sc.status)
					}
					// Spans are exported in batches as they end: wait for
					// every span the tree is checked for, not the first.
					spans := rcv.Wait(t, 5*time.Second, func(s []otlptest.Span) bool {
						return sc.exported(otlptest.Trace(s, traceID))
					})
					checkTree(t, sc, otlptest.Trace(spans, traceID), clientSpan, m, vrec)
				})
			}
		}
	}
	for _, raw := range rcv.Raw() {
		for _, mark := range traceMarkers {
			if strings.Contains(string(raw), mark) {
				t.Errorf("an export carries the secret marker %s", mark)
			}
		}
	}
}

// exported reports whether a trace holds every span the scenario's tree
// has: the server span, each upstream call, judged call and validator call.
func (sc traceScenario) exported(spans []otlptest.Span) bool {
	var up, judged, validated int
	for _, s := range spans {
		switch {
		case s.Attr("toolgate.upstream.kind") != "":
			up++
		case strings.HasPrefix(s.Name, "judge_tool "):
			judged++
		case strings.HasPrefix(s.Name, "validator "):
			validated++
		}
	}
	return serverSpan(spans) != nil && up >= len(sc.kinds) && judged >= len(sc.judged) && validated >= sc.validated
}

func serverSpan(spans []otlptest.Span) *otlptest.Span {
	for i := range spans {
		if spans[i].Kind == 2 { // SPAN_KIND_SERVER
			return &spans[i]
		}
	}
	return nil
}

// checkTree checks the trace of one request: the server span under the
// client's, the upstream and judged calls under it, the validators under
// the judged calls, and the upstream and validator each told the span
// that called them.
func checkTree(t *testing.T, sc traceScenario, spans []otlptest.Span, clientSpan string, m *mockUpstream, vrec *recorder) {
	t.Helper()
	srv := *serverSpan(spans)
	if srv.ParentID != clientSpan {
		t.Errorf("server span's parent %s, want the client's %s", srv.ParentID, clientSpan)
	}
	if srv.Attr("toolgate.outcome") != sc.outcome || srv.Attr("toolgate.catalog_version") != fixtureVersion ||
		srv.Attr("http.response.status_code") != itoa(sc.status) || srv.Attr("gen_ai.operation.name") == "" {
		t.Errorf("server span %q attrs %v", srv.Name, srv.Attrs)
	}
	if (sc.outcome == "escalated") != strings.HasPrefix(srv.Attr("toolgate.escalation_id"), "esc_") {
		t.Errorf("escalation id %q on a %s request", srv.Attr("toolgate.escalation_id"), sc.outcome)
	}
	var kinds, judged []string
	upIDs, judgeIDs, validatorIDs := map[string]bool{}, map[string]bool{}, []string{}
	var upOrder []string
	slices.SortFunc(spans, func(a, b otlptest.Span) int { return a.Start.Compare(b.Start) })
	for _, s := range spans {
		switch {
		case s.Attr("toolgate.upstream.kind") != "":
			kinds = append(kinds, s.Attr("toolgate.upstream.kind"))
			upIDs[s.SpanID] = true
			upOrder = append(upOrder, s.SpanID)
			if s.ParentID != srv.SpanID || s.Attr("gen_ai.provider.name") == "" || s.Attr("gen_ai.usage.input_tokens") == "" {
				t.Errorf("upstream span %q parent %s attrs %v", s.Name, s.ParentID, s.Attrs)
			}
		case strings.HasPrefix(s.Name, "judge_tool "):
			judged = append(judged, s.Attr("gen_ai.tool.name"))
			judgeIDs[s.SpanID] = true
			if s.ParentID != srv.SpanID || s.Attr("gen_ai.tool.call.id") == "" {
				t.Errorf("judged span %q parent %s attrs %v", s.Name, s.ParentID, s.Attrs)
			}
		case strings.HasPrefix(s.Name, "validator "):
			validatorIDs = append(validatorIDs, s.SpanID)
			if !judgeIDs[s.ParentID] || s.Attr("toolgate.validator.result") != "allowed" {
				t.Errorf("validator span parent %s attrs %v", s.ParentID, s.Attrs)
			}
		}
	}
	if !slices.Equal(kinds, sc.kinds) {
		t.Errorf("upstream kinds %v, want %v", kinds, sc.kinds)
	}
	slices.Sort(judged)
	want := slices.Sorted(slices.Values(sc.judged))
	if !slices.Equal(judged, want) {
		t.Errorf("judged %v, want %v", judged, want)
	}
	if len(validatorIDs) != sc.validated {
		t.Errorf("%d validator spans, want %d", len(validatorIDs), sc.validated)
	}
	traceID := srv.TraceID
	for i, r := range m.requests() {
		tp := r.Header.Get("Traceparent")
		if i >= len(upOrder) || tp != "00-"+traceID+"-"+upOrder[i]+"-01" {
			t.Errorf("upstream request %d traceparent %q, want its upstream span's", i+1, tp)
		}
		if r.Header.Get("Tracestate") != "vendor=abc" {
			t.Errorf("upstream request %d tracestate %q", i+1, r.Header.Get("Tracestate"))
		}
	}
	for i, tp := range vrec.got() {
		if !strings.HasPrefix(tp, "00-"+traceID+"-") || !slices.Contains(validatorIDs, tp[36:52]) {
			t.Errorf("validator request %d traceparent %q, want its validator span's", i+1, tp)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func mustUnmarshal(s string, v any) {
	if err := json.Unmarshal([]byte(s), v); err != nil {
		panic(err)
	}
}
