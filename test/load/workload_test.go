package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/validate"
)

func TestFirstText(t *testing.T) {
	cases := []struct {
		got  string
		from int
		want bool
	}{
		{`{"delta":{"content":null}}`, 0, false},
		{`{"delta":{"content":"","role":"assistant"}}`, 0, false},
		{`{"delta":{"content":"I'll"}}`, 0, true},
		{`{"content":""} {"content":"x"}`, 0, true},
		// The marker's last byte arrived but not the next one: not yet.
		{`{"delta":{"content":"`, 0, false},
		// Text before from was seen by an earlier search.
		{`{"content":"x"} {"content":""}`, 16, false},
	}
	for _, c := range cases {
		if got := firstText([]byte(c.got), c.from); got != c.want {
			t.Errorf("firstText(%q, %d) = %v, want %v", c.got, c.from, got, c.want)
		}
	}
	// A marker cut by a read is found once the next bytes come.
	all := []byte(`data: {"delta":{"content":"Hi"}}`)
	for cut := 1; cut < len(all); cut++ {
		found := firstText(all[:cut], 0)
		if !found {
			found = firstText(all, textSearchFrom(cut))
		}
		if !found {
			t.Fatalf("cut at %d: the text was never seen", cut)
		}
	}
}

// TestFixtureWorkload proves the mock sends the files' bytes and the driver
// expects them: 40 events that join into answer.sse exactly, two calls,
// text, [DONE].
func TestFixtureWorkload(t *testing.T) {
	w := workloads[fixtureWorkload]
	sse, err := os.ReadFile("testdata/bench/answer.sse")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.stream, sse) || len(w.events) != 40 {
		t.Fatalf("stream is %d bytes in %d events, want answer.sse's %d bytes in 40", len(w.stream), len(w.events), len(sse))
	}
	a := w.want
	if !a.Done || a.Events != 40 || a.Text == "" || a.Finish != "tool_calls" || len(a.Calls) != 2 ||
		a.Calls[0].Name != "create_calendar_event" || a.Calls[1].Name != "search_flights" {
		t.Fatalf("assembled %+v", a)
	}
	if len(a.Calls[0].Args) != 710 || len(a.Calls[1].Args) != 289 {
		t.Fatalf("arguments of %d and %d bytes, want 710 and 289", len(a.Calls[0].Args), len(a.Calls[1].Args))
	}
}

func TestJudgeStream(t *testing.T) {
	w := workloads[fixtureWorkload]
	reframed := bytes.ReplaceAll(w.stream, []byte("\n\n"), []byte("\r\n\r\n"))
	cut := w.stream[:len(w.stream)-len(w.events[len(w.events)-1])]
	changed := bytes.Replace(w.stream, []byte(`BER`), []byte(`TXL`), 1)
	for _, c := range []struct {
		name string
		got  []byte
		want outcome
	}{
		{"exact", w.stream, okExact},
		{"reframed", reframed, okReframed},
		{"no [DONE]", cut, truncated},
		{"other arguments", changed, corrupted},
	} {
		if got := w.judgeStream(c.got); got != c.want {
			t.Errorf("%s: outcome %d, want %d", c.name, got, c.want)
		}
	}
}

// TestToolgateConfigJudgesFixtureValid compiles the config the harness
// gives toolgate and checks that both fixture calls pass it: if they did
// not, every toolgate answer would be a repair and the run would measure
// the wrong thing.
func TestToolgateConfigJudgesFixtureValid(t *testing.T) {
	cfgText, err := toolgateConfig("127.0.0.1:1", "127.0.0.1:2", "http://127.0.0.1:3", "info")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := catalog.Parse([]byte(cfgText), "load.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, cfgText)
	}
	snap, err := catalog.Compile(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := workloads[fixtureWorkload]
	cd := openaichat.API{}.NewCodec()
	req, err := cd.DecodeRequest("", w.plainReq)
	if err != nil {
		t.Fatal(err)
	}
	cx := &validate.Context{Effective: snap.Effective(req.Offered, req.Choice, true), Evidence: validate.NewCorpus(req.Vouching), HistoryUpstream: req.HistoryUpstream}
	resp, err := cd.DecodeAnswer(w.answer)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Choices[0].Calls
	if len(calls) != 2 {
		t.Fatalf("%d calls", len(calls))
	}
	for _, c := range calls {
		if v := validate.Check(c, cx); !v.Valid() {
			t.Errorf("%s: %+v", c.Name, v.Findings)
		}
	}
	// And a call the fixture's schema forbids is caught, so the catalog
	// really is the fixture's and not an open one.
	bad := calls[1]
	bad.Args = []byte(strings.Replace(string(bad.Args), `"BER"`, `"Berlin"`, 1))
	if v := validate.Check(bad, cx); v.Valid() {
		t.Error("an origin outside the schema's pattern passed")
	}
}

// TestMockServesWorkloads drives the mock directly: each workload's header
// selects its answer, plain and streamed, byte for byte.
func TestMockServesWorkloads(t *testing.T) {
	srv := httptest.NewServer(mockHandler(&mockStats{}))
	defer srv.Close()
	d := newDriver(10 * time.Second)
	for _, wl := range []string{smallWorkload, fixtureWorkload} {
		for _, stream := range []bool{false, true} {
			if s := d.one(context.Background(), srv.URL, scenario{Stream: stream, Workload: wl}, time.Now()); s.out != okExact {
				t.Errorf("%s stream=%v: outcome %d", wl, stream, s.out)
			} else if stream && s.ttfb == 0 {
				t.Errorf("%s stream: no first text byte seen", wl)
			}
		}
	}
}

// TestNginxTarget starts nginx from the generated config in front of the
// mock and checks both fixture answers come through it unchanged, and
// that its CPU is read over its master and workers. Skipped where nginx
// is not installed.
func TestNginxTarget(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx not on PATH")
	}
	mock := httptest.NewServer(mockHandler(&mockStats{}))
	defer mock.Close()
	tmp, err := os.MkdirTemp("", "toolgate-load-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ng, addr, err := startNginx(ctx, bin, tmp, strings.TrimPrefix(mock.URL, "http://"))
	defer ng.stop()
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(10 * time.Second)
	for _, stream := range []bool{false, true} {
		if s := d.one(ctx, "http://"+addr, scenario{Stream: stream, Workload: fixtureWorkload}, time.Now()); s.out != okExact {
			t.Errorf("stream=%v through nginx: outcome %d", stream, s.out)
		}
	}
	own, err1 := cpuMicros(ng.pid())
	tree, err2 := cpuTree(ng.pid())
	if err1 != nil || err2 != nil || tree < own {
		t.Errorf("cpu: master %v (%v), with workers %v (%v)", own, err1, tree, err2)
	}
	if n := countChildren(t, ng.pid()); n < 1 {
		t.Errorf("nginx master has %d worker processes", n)
	}
}

func countChildren(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err != nil {
		t.Skipf("no /proc children list: %v", err)
	}
	return len(strings.Fields(string(b)))
}

// With -trace-ratio the harness's config turns tracing on at that ratio,
// toward its collector, and the collector counts what toolgate exports.
func TestTracingConfigAndCollector(t *testing.T) {
	cfgText, err := toolgateConfig("127.0.0.1:1", "127.0.0.1:2", "http://127.0.0.1:3", "info")
	if err != nil {
		t.Fatal(err)
	}
	if tracingYAML("127.0.0.1:4", -1) != "" {
		t.Fatal("a negative ratio turned tracing on")
	}
	cfg, err := catalog.Parse([]byte(cfgText+tracingYAML("127.0.0.1:4", 0.01)), "load.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tracing.Endpoint != "http://127.0.0.1:4" || *cfg.Tracing.SampleRatio != 0.01 {
		t.Fatalf("tracing %+v", cfg.Tracing)
	}
	col, err := startCollector()
	if err != nil {
		t.Fatal(err)
	}
	defer col.close()
	p, err := telemetry.New(telemetry.Config{Endpoint: "http://" + col.addr, Protocol: telemetry.ProtocolHTTP, SampleRatio: 1}, telemetry.Tuning{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, sp := p.Tracer().Start(context.Background(), "s")
		sp.End()
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := col.spans.Load(); n != 3 {
		t.Errorf("collector counted %d spans, want 3", n)
	}
}
