package anthropic

import (
	"bytes"
	"testing"

	"github.com/toolgate/toolgate/proxy/sse"
)

// benchEvents reads a stream's events once, so the benchmark times the
// decoder and not the SSE reader.
func benchEvents(b *testing.B, stream []byte) []sse.Event {
	b.Helper()
	var evs []sse.Event
	rd := sse.NewReader(bytes.NewReader(stream), 0)
	for rd.Next() {
		ev := rd.Event()
		ev.Raw, ev.Data = bytes.Clone(ev.Raw), bytes.Clone(ev.Data)
		evs = append(evs, ev)
	}
	if err := rd.Err(); err != nil {
		b.Fatal(err)
	}
	return evs
}

// BenchmarkStreamFeed feeds whole recorded Messages streams through a new
// stream per iteration and assembles the turn, as the pipeline does.
func BenchmarkStreamFeed(b *testing.B) {
	for _, tc := range []struct{ name, stream string }{
		{"tool_use", string(fixture(b, "tool_use_stream.sse"))},
		{"parallel_tool_use", string(fixture(b, "parallel_tool_use_stream.sse"))},
		{"mixed", mixedStream},
	} {
		evs := benchEvents(b, []byte(tc.stream))
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				st := newCodec().NewStream()
				for i := range evs {
					if _, err := st.Feed(&evs[i]); err != nil {
						b.Fatal(err)
					}
				}
				if len(st.Turns()[0].Calls) == 0 {
					b.Fatal("no calls")
				}
			}
		})
	}
}

// BenchmarkStreamFeedEvents is BenchmarkStreamFeed without assembling the
// turn: the reading of the events alone.
func BenchmarkStreamFeedEvents(b *testing.B) {
	for _, tc := range []struct{ name, stream string }{
		{"tool_use", string(fixture(b, "tool_use_stream.sse"))},
		{"parallel_tool_use", string(fixture(b, "parallel_tool_use_stream.sse"))},
		{"mixed", mixedStream},
	} {
		evs := benchEvents(b, []byte(tc.stream))
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				st := newCodec().NewStream()
				for i := range evs {
					if _, err := st.Feed(&evs[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkDecodeAnswer reads whole recorded Messages answers, as the
// pipeline does for every answer that is not streamed.
func BenchmarkDecodeAnswer(b *testing.B) {
	for _, name := range []string{"tool_use", "parallel_tool_use"} {
		body := fixture(b, name+".json")
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a, err := newCodec().DecodeAnswer(body)
				if err != nil {
					b.Fatal(err)
				}
				if len(a.Choices[0].Calls) == 0 {
					b.Fatal("no calls")
				}
			}
		})
	}
}
