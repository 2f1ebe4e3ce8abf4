package openaichat_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/proxy/openaichat"
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

// BenchmarkFindingsWorkload is DecodeAnswer of answer.json and Check of
// both its calls against the compiled workload catalog.
func BenchmarkFindingsWorkload(b *testing.B) {
	runFindings(b, workloadFile(b, "answer.json"), workloadContext(b))
}

// BenchmarkStreamFilterWorkload is the validating work on answer.sse: Feed
// of its 40 events, Turns, and Check of both assembled calls. Events are
// framed once outside the loop, as in BenchmarkStreamFilter.
func BenchmarkStreamFilterWorkload(b *testing.B) {
	evs := readEvents(b, workloadFile(b, "answer.sse"))
	if len(evs) != 40 {
		b.Fatalf("answer.sse has %d events, want 40", len(evs))
	}
	runStreamFilter(b, evs, workloadContext(b))
}

// BenchmarkReadAnswerWorkload is all the reading of answer.json the
// pipeline asks for: DecodeAnswer, which also holds the answer to UTF-8
// and refuses keys folding onto protocol keys, in the same pass.
func BenchmarkReadAnswerWorkload(b *testing.B) {
	answer := workloadFile(b, "answer.json")
	cd := openaichat.API{}.NewCodec()
	b.ReportAllocs()
	b.SetBytes(int64(len(answer)))
	for b.Loop() {
		if _, err := cd.DecodeAnswer(answer); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamReadWorkload is all the reading of answer.sse's 40
// events the pipeline asks for: Feed of each (which refuses folded keys
// in the pass that reads the event) and Turns, without judging.
func BenchmarkStreamReadWorkload(b *testing.B) {
	evs := readEvents(b, workloadFile(b, "answer.sse"))
	cd := openaichat.API{}.NewCodec()
	b.ReportAllocs()
	for b.Loop() {
		st := cd.NewStream()
		for i := range evs {
			if _, err := st.Feed(&evs[i]); err != nil {
				b.Fatal(err)
			}
		}
		if len(st.Turns()) != 1 {
			b.Fatal("want one turn")
		}
	}
}
