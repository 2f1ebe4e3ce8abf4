package openaichat_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/proxy/openaichat"
	"github.com/toolgate/toolgate/proxy/sse"
	"github.com/toolgate/toolgate/validate"
)

// The realistic workload of the load test (test/load/testdata/bench): a
// 2.4 KB answer whose two calls carry 710 and 289 bytes of arguments,
// judged against the catalog of that folder's toolgate.yaml (format,
// pattern, enum, nested required, additionalProperties false). Read from
// the load test's folder so both measure the same bytes.

func workloadFile(b *testing.B, name string) []byte {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "test", "load", "testdata", "bench", name))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func workloadContext(b *testing.B) *validate.Context {
	b.Helper()
	return benchContextFor(b, workloadFile(b, "toolgate.yaml"), workloadFile(b, "request.json"))
}

// checkAll judges every call and fails the benchmark on any finding: the
// workload's calls are valid, so a finding means the benchmark measures
// the wrong path.
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

// BenchmarkFindingsWorkload is ParseResponse of answer.json and Check of
// both its calls against the compiled workload catalog.
func BenchmarkFindingsWorkload(b *testing.B) {
	answer := workloadFile(b, "answer.json")
	cx := workloadContext(b)
	ad := openaichat.Adapter{}
	b.ReportAllocs()
	b.SetBytes(int64(len(answer)))
	for b.Loop() {
		resp, err := ad.ParseResponse(answer)
		if err != nil {
			b.Fatal(err)
		}
		checkAll(b, resp.Choices[0].Calls, cx)
	}
}

// BenchmarkStreamFilterWorkload is the validating work on answer.sse: Feed
// of its 40 events, Turns, and Check of both assembled calls. Events are
// framed once outside the loop, as in BenchmarkStreamFilter.
func BenchmarkStreamFilterWorkload(b *testing.B) {
	data := workloadFile(b, "answer.sse")
	var evs []sse.Event
	rd := sse.NewReader(bytes.NewReader(data), 0)
	for rd.Next() {
		ev := rd.Event()
		evs = append(evs, sse.Event{Raw: bytes.Clone(ev.Raw), Data: bytes.Clone(ev.Data), Event: ev.Event, Comment: ev.Comment})
	}
	if err := rd.Err(); err != nil {
		b.Fatal(err)
	}
	if len(evs) != 40 {
		b.Fatalf("answer.sse has %d events, want 40", len(evs))
	}
	cx := workloadContext(b)
	ad := openaichat.Adapter{}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		st := ad.NewStream(nil)
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
