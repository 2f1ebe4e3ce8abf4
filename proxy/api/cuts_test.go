package api_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/api/apitest"
	"github.com/toolgate/toolgate/proxy/sse"
)

// What a stream reads never depends on how the upstream cut its bytes
// (SPEC §7): each codec's recorded streams are read through the reader
// the pipeline uses, from a source that returns them in pieces, and every
// event's bytes are overwritten once Feed returns, as the reader does
// when it reads the next event into the same buffer. The steps, what is
// forwarded and held, the assembled turns and what Encode writes must be
// those of the stream read whole.

// cutStream is a recorded stream of one API, read by the codec of one
// conformance row.
type cutStream struct {
	row  string
	file string // relative to proxy/api
}

// cutStreams are every recorded stream of the codecs' testdata.
func cutStreams(t testing.TB) []cutStream {
	t.Helper()
	var out []cutStream
	for _, g := range []struct{ row, glob string }{
		{"chat", "../openaichat/testdata/*.sse"},
		{"messages", "../anthropic/testdata/*.sse"},
		{"responses", "../responses/testdata/*.sse"},
		{"gemini", "../gemini/testdata/recorded/sse_*.sse"},
		{"gemini array", "../gemini/testdata/recorded/array_*.json"},
	} {
		files, err := filepath.Glob(g.glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("no recorded streams at %s (%v)", g.glob, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, ".request.json") {
				continue
			}
			out = append(out, cutStream{g.row, f})
		}
	}
	return out
}

func rowNamed(t testing.TB, name string) *conformanceCase {
	for i := range conformance {
		if conformance[i].name == name {
			return &conformance[i]
		}
	}
	t.Fatalf("no conformance row %q", name)
	return nil
}

// piecesReader returns src in pieces of the given lengths, one piece (or
// what fits of it) per Read, as a socket whose peer flushed after each.
type piecesReader struct {
	src    []byte
	pieces []int
}

func (r *piecesReader) Read(p []byte) (int, error) {
	if len(r.src) == 0 {
		return 0, io.EOF
	}
	n := len(r.src)
	if len(r.pieces) > 0 {
		n = min(n, r.pieces[0])
	}
	n = copy(p, r.src[:n])
	r.src = r.src[n:]
	if len(r.pieces) > 0 {
		if r.pieces[0] -= n; r.pieces[0] <= 0 {
			r.pieces = r.pieces[1:]
		}
	}
	return n, nil
}

// cuts are the ways a stream's bytes are cut: all at once, one event per
// piece, 7-byte and 1-byte pieces and n random cuts.
func cuts(body []byte, events []int, seed uint64, n int) map[string][]int {
	out := map[string][]int{"whole": {len(body)}, "events": events, "7 bytes": evenly(len(body), 7), "1 byte": evenly(len(body), 1)}
	rng := rand.New(rand.NewPCG(seed, uint64(len(body))))
	for i := range n {
		out[fmt.Sprintf("random %d", i)] = randomCuts(rng, len(body))
	}
	return out
}

func evenly(size, n int) []int {
	out := make([]int, 0, size/n+1)
	for ; size > 0; size -= n {
		out = append(out, min(n, size))
	}
	return out
}

// randomCuts cuts size bytes at random places, into pieces of one byte
// to a few hundred.
func randomCuts(rng *rand.Rand, size int) []int {
	var out []int
	for size > 0 {
		n := min(size, 1+rng.IntN(1+rng.IntN(400)))
		out = append(out, n)
		size -= n
	}
	return out
}

// readCut is everything a stream made of body read in pieces tells the
// pipeline, written out so that two reads compare as text.
func (cc *conformanceCase) readCut(t *testing.T, body []byte, pieces []int) string {
	c := cc.codec(t)
	src := &piecesReader{src: body, pieces: slices.Clone(pieces)}
	var st api.Stream
	var rd api.EventReader
	if cc.framed != "" {
		st, rd, _ = c.NewFramedStream(http.Header{"Content-Type": {cc.framed}}, src)
	} else {
		st, rd = c.NewStream(), sse.NewReader(src, 1<<20)
	}
	run := &apitest.Run{}
	var b strings.Builder
	var err error
	for !run.Done && run.UpstreamError == nil && rd.Next() {
		ev := rd.Event()
		own := ownEvent(ev)
		_, err = run.Feed(st, &own)
		scribble(own)
		if err != nil {
			break
		}
	}
	if err == nil {
		err = rd.Err()
	}
	fmt.Fprintf(&b, "err %v\nsteps %+v\nforwarded %q\nheld %q\ncomplete %v usage %+v\n", err, run.Steps, run.Forwarded, run.HeldBytes(), st.Complete(), st.Usage())
	turns := st.Turns()
	for _, tu := range turns {
		fmt.Fprintf(&b, "turn %q %q %v %+v\n", tu.ResponseID, tu.Text, tu.Stop, tu.Usage)
		for _, c := range tu.Calls {
			fmt.Fprintf(&b, "  call %q %q %s %v %v\n", c.ID, c.Name, c.Args, c.Kind, c.BadShape)
		}
	}
	if err != nil || len(turns) == 0 {
		return b.String()
	}
	// A turn's Raw is what a re-query replays, after the stream's events
	// are long gone.
	var replies []neutral.CallReply
	for _, call := range turns[0].Calls {
		replies = append(replies, neutral.CallReply{CallID: call.ID, Content: "checked", IsError: true})
	}
	q, err := c.ReQuery(nil, &neutral.Query{Kind: neutral.KindReprompt, History: []neutral.Round{{Turn: turns[0], Replies: replies}}})
	fmt.Fprintf(&b, "re-query %v %s\n", err, q)
	if len(run.Held) == 0 {
		return b.String()
	}
	acts := [][]neutral.Action{actionsFor(len(turns), neutral.Action{Kind: neutral.Keep}), actionsFor(len(turns), responding())}
	if len(turns[0].Calls) > 0 {
		acts = append(acts, actionsFor(len(turns), replacement(turns[0].Calls)))
	}
	for _, a := range acts {
		out, err := st.Encode(run.Held, a, run.Sent())
		fmt.Fprintf(&b, "encoded %v %q\n", err, out)
	}
	return b.String()
}

// ownEvent is ev in a buffer of its own, which scribble overwrites.
func ownEvent(ev sse.Event) sse.Event {
	own := ev
	own.Raw = bytes.Clone(ev.Raw)
	if ev.DataAt > 0 {
		own.Data = own.Raw[ev.DataAt : ev.DataAt+len(ev.Data) : ev.DataAt+len(ev.Data)]
	} else if ev.Data != nil {
		own.Data = bytes.Clone(ev.Data)
	}
	if ev.Event != nil {
		own.Event = bytes.Clone(ev.Event)
	}
	if ev.ID != nil {
		own.ID = bytes.Clone(ev.ID)
	}
	return own
}

// scribble overwrites an event's bytes, as the reader does with the next
// event's.
func scribble(ev sse.Event) {
	for _, b := range [][]byte{ev.Raw, ev.Data, ev.Event, ev.ID} {
		for i := range b {
			b[i] = '#'
		}
	}
}

// eventLengths is the length of each event of body, as the row's reader
// finds them.
func (cc *conformanceCase) eventLengths(t *testing.T, body []byte) []int {
	var out []int
	var rd api.EventReader = sse.NewReader(bytes.NewReader(body), 1<<20)
	if cc.framed != "" {
		_, rd, _ = cc.codec(t).NewFramedStream(http.Header{"Content-Type": {cc.framed}}, bytes.NewReader(body))
	}
	for rd.Next() {
		out = append(out, len(rd.Event().Raw))
	}
	return out
}

func TestStreamCutsCodecs(t *testing.T) {
	for _, s := range cutStreams(t) {
		cc := rowNamed(t, s.row)
		body, err := os.ReadFile(s.file)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(s.row+"/"+filepath.Base(s.file), func(t *testing.T) {
			cc.sameForEveryCut(t, body)
		})
		if cc.framed == "" {
			// Lines may end in CRLF, whose two bytes a cut can part.
			t.Run(s.row+"/"+filepath.Base(s.file)+"/CRLF", func(t *testing.T) {
				cc.sameForEveryCut(t, bytes.ReplaceAll(body, []byte("\n"), []byte("\r\n")))
			})
			// An event's data may come in several lines, which the
			// reader joins in a buffer of its own that it reuses.
			t.Run(s.row+"/"+filepath.Base(s.file)+"/data lines", func(t *testing.T) {
				cc.sameForEveryCut(t, bytes.ReplaceAll(body, []byte("data: {"), []byte("data: {\ndata: ")))
			})
		}
	}
}

// sameForEveryCut requires the read of body whole from every cut.
func (cc *conformanceCase) sameForEveryCut(t *testing.T, body []byte) {
	want := cc.readCut(t, body, []int{len(body)})
	if !strings.HasPrefix(want, "err <nil>") {
		t.Fatalf("read whole:\n%s", want)
	}
	for name, pieces := range cuts(body, cc.eventLengths(t, body), 1, 16) {
		if got := cc.readCut(t, body, pieces); got != want {
			t.Errorf("cut %s: read\n%s\nwhole\n%s", name, got, want)
		}
	}
}

// FuzzStreamCutsCodecs cuts each recorded stream where the fuzzer says:
// each byte of cuts is the length of one piece (its value plus one), the
// last repeated to the end of the stream.
func FuzzStreamCutsCodecs(f *testing.F) {
	streams := cutStreams(f)
	for i := range streams {
		f.Add(uint8(i), []byte{0})
		f.Add(uint8(i), []byte{6})
		f.Add(uint8(i), []byte{200, 3, 0, 90, 17})
	}
	wants := make([]string, len(streams))
	f.Fuzz(func(t *testing.T, which uint8, cuts []byte) {
		s := streams[int(which)%len(streams)]
		cc := rowNamed(t, s.row)
		body, err := os.ReadFile(s.file)
		if err != nil {
			t.Fatal(err)
		}
		want := &wants[int(which)%len(streams)]
		if *want == "" {
			*want = cc.readCut(t, body, []int{len(body)})
		}
		if got := cc.readCut(t, body, apitest.Pieces(cuts, len(body))); got != *want {
			t.Fatalf("%s cut %v: read\n%s\nwhole\n%s", s.file, cuts, got, *want)
		}
	})
}
