package openaichat_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/proxy/sse"
	"github.com/toolgate/toolgate/validate"
)

// These benchmarks time the per-answer work of the Chat Completions route
// without any HTTP: reading the answer or stream, then judging its calls,
// against a catalog whose tools carry the fixture's JSON Schemas.

func benchFixture(b *testing.B, name string) []byte {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// benchCatalog compiles a config catalog holding the two fixture tools with
// the same schemas request.json offers, so calls are judged by catalog
// schemas (intersect mode) as in a configured deployment.
const benchCatalog = `
upstreams:
  - url: https://api.example.com
catalog:
  tools:
    - name: get_current_weather
      description: Get the current weather in a given location
      parameters:
        type: object
        properties:
          location: {type: string, description: "The city and state, e.g. San Francisco, CA"}
          unit: {type: string, enum: [celsius, fahrenheit]}
        required: [location]
    - name: get_stock_price
      description: Fetch the latest price for a given ticker
      parameters:
        type: object
        properties:
          ticker: {type: string, description: "Ticker symbol, e.g. AAPL"}
          exchange: {type: string, description: "Exchange the ticker is listed on, e.g. NASDAQ"}
        required: [ticker, exchange]
`

// benchContext parses request.json as the route would and builds the
// request's effective catalog once: both are per request, not per call.
func benchContext(b *testing.B) *validate.Context {
	b.Helper()
	return benchContextFor(b, []byte(benchCatalog), benchFixture(b, "request.json"))
}

// benchContextFor is benchContext for any config and request.
func benchContextFor(b *testing.B, config, request []byte) *validate.Context {
	b.Helper()
	cfg, err := catalog.Parse(config, "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	req, err := openaichat.API{}.NewCodec().DecodeRequest("", request)
	if err != nil {
		b.Fatal(err)
	}
	eff := snap.Effective(req.Offered, req.Choice, true)
	return &validate.Context{Effective: eff, Evidence: validate.NewCorpus(req.Vouching), HistoryUpstream: req.HistoryUpstream}
}

// BenchmarkFindingsTwoCalls is the work between an upstream answer arriving
// and its verdict: DecodeAnswer of a two-call answer and Check of each call.
func BenchmarkFindingsTwoCalls(b *testing.B) {
	runFindings(b, benchFixture(b, "parallel_tool_calls.json"), benchContext(b))
}

// runFindings times DecodeAnswer of answer and Check of its two calls.
// The codec is made once, as a request's codec decodes all its answers.
func runFindings(b *testing.B, answer []byte, cx *validate.Context) {
	cd := openaichat.API{}.NewCodec()
	b.ReportAllocs()
	b.SetBytes(int64(len(answer)))
	start := processCPU()
	for b.Loop() {
		resp, err := cd.DecodeAnswer(answer)
		if err != nil {
			b.Fatal(err)
		}
		checkAll(b, resp.Choices[0].Calls, cx)
	}
	reportCPU(b, start)
}

// processCPU is the CPU time the process has used. Reported per operation
// beside ns/op (wall time), it stays meaningful on a machine whose cores
// other work shares; it includes the garbage collector's workers.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}

// checkAll judges every call and fails the benchmark on any finding: the
// answers are valid, so a finding means the benchmark measures the wrong
// path.
func checkAll(b *testing.B, calls []validate.ToolCall, cx *validate.Context) {
	if len(calls) != 2 {
		b.Fatalf("%d calls, want 2", len(calls))
	}
	for _, c := range calls {
		if v := validate.Check(c, cx); !v.Valid() {
			b.Fatalf("%s: %+v", c.Name, v.Findings)
		}
	}
}

// streamEvents is the 40-event stream the load test's mock serves, built on
// the recorded parallel fixture (21 events): 18 text deltas are inserted
// after the role chunk and a usage chunk before [DONE], so the text-first,
// tools-after shape of a real answer is there and the count matches.
func streamEvents(b *testing.B) []sse.Event {
	b.Helper()
	fixture := readEvents(b, benchFixture(b, "parallel_tool_calls_stream.sse"))
	if len(fixture) != 21 {
		b.Fatalf("fixture has %d events, want 21", len(fixture))
	}
	const head = `{"id":"chatcmpl-zupGhv7Ib3M03NBQNSgPwlUQia1ID","object":"chat.completion.chunk","created":1741569980,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_bed440e504",`
	event := func(data string) sse.Event {
		raw := sse.AppendEvent(nil, "", []byte(data))
		return sse.Event{Raw: raw, Data: []byte(data)}
	}
	words := strings.Fields("Let me check the weather in Boston and the current price of Apple stock on NASDAQ for you right now, one moment.")
	evs := []sse.Event{fixture[0]}
	for i := range 18 {
		w := words[i%len(words)] + " "
		evs = append(evs, event(head+`"choices":[{"index":0,"delta":{"content":"`+w+`"},"logprobs":null,"finish_reason":null}]}`))
	}
	evs = append(evs, fixture[1:20]...)
	evs = append(evs, event(head+`"choices":[],"usage":{"prompt_tokens":118,"completion_tokens":58,"total_tokens":176}}`))
	evs = append(evs, fixture[20])
	if len(evs) != 40 {
		b.Fatalf("built %d events, want 40", len(evs))
	}
	return evs
}

// readEvents frames an SSE body into events that own their bytes, once,
// outside the timed loop.
func readEvents(b *testing.B, data []byte) []sse.Event {
	b.Helper()
	var evs []sse.Event
	rd := sse.NewReader(bytes.NewReader(data), 0)
	for rd.Next() {
		ev := rd.Event()
		evs = append(evs, sse.Event{Raw: bytes.Clone(ev.Raw), Data: bytes.Clone(ev.Data), Event: ev.Event, Comment: ev.Comment})
	}
	if err := rd.Err(); err != nil {
		b.Fatal(err)
	}
	return evs
}

// BenchmarkStreamFilter is the validating work on one streamed answer:
// Feed of all 40 events, Turns, and Check of each assembled call. SSE
// framing and socket I/O are left out (see BenchmarkProxyStream).
func BenchmarkStreamFilter(b *testing.B) {
	runStreamFilter(b, streamEvents(b), benchContext(b))
}

// runStreamFilter times Feed of every event, Turns, and Check of the one
// turn's two calls.
func runStreamFilter(b *testing.B, evs []sse.Event, cx *validate.Context) {
	cd := openaichat.API{}.NewCodec()
	n := 0
	for _, ev := range evs {
		n += len(ev.Raw)
	}
	b.ReportAllocs()
	b.SetBytes(int64(n))
	for b.Loop() {
		st := cd.NewStream()
		for i := range evs {
			if _, err := st.Feed(&evs[i]); err != nil {
				b.Fatal(err)
			}
		}
		turns := st.Turns()
		if len(turns) != 1 {
			b.Fatalf("%d turns, want 1", len(turns))
		}
		checkAll(b, turns[0].Calls, cx)
	}
	b.ReportMetric(float64(len(evs)), "events/op")
}
