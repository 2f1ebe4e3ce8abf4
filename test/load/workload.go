package main

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
)

// A workload is one exchange the mock serves and the driver checks: the
// request bodies, the plain answer, and the stream as the events the mock
// writes one by one. "small" is the two short calls built in payload.go;
// "fixture" is testdata/bench (a 2.4 KB answer whose two calls are judged
// against schemas with format, pattern, enum and nested required), read
// from the files so the bytes sent are the files' bytes.

//go:embed testdata/bench
var benchFS embed.FS

// workloadHeader tells the mock which workload to answer with. Every
// target forwards it like any client header.
const workloadHeader = "X-Mock-Workload"

const (
	smallWorkload   = "small"
	fixtureWorkload = "fixture"
)

type workload struct {
	name      string
	plainReq  []byte
	streamReq []byte
	answer    []byte
	events    [][]byte // one element per event, blank line included
	stream    []byte   // the events joined: what a client must receive
	want      assembled
}

// workloads are built once; the mock and the driver share them.
var workloads = func() map[string]*workload {
	small := &workload{name: smallWorkload, plainReq: requestBody(false), streamReq: requestBody(true),
		answer: []byte(answerJSON), events: streamEvents()}
	fix, err := loadFixture()
	if err != nil {
		panic(err)
	}
	out := map[string]*workload{}
	for _, w := range []*workload{small, fix} {
		w.stream = bytes.Join(w.events, nil)
		w.want = assemble(w.stream)
		out[w.name] = w
	}
	return out
}()

func benchFile(name string) []byte {
	b, err := benchFS.ReadFile("testdata/bench/" + name)
	if err != nil {
		panic(err)
	}
	return b
}

// fixtureEvents is the number of events answer.sse holds, [DONE] included.
const fixtureEvents = 40

func loadFixture() (*workload, error) {
	w := &workload{name: fixtureWorkload, plainReq: benchFile("request.json"),
		streamReq: benchFile("request-stream.json"), answer: benchFile("answer.json")}
	var err error
	if w.events, err = splitEvents(benchFile("answer.sse")); err != nil {
		return nil, fmt.Errorf("testdata/bench/answer.sse: %w", err)
	}
	if len(w.events) != fixtureEvents {
		return nil, fmt.Errorf("testdata/bench/answer.sse has %d events, want %d", len(w.events), fixtureEvents)
	}
	return w, nil
}

// splitEvents cuts an SSE body at its blank lines, keeping each event's
// bytes exactly as they are in the file.
func splitEvents(body []byte) ([][]byte, error) {
	var out [][]byte
	for rest := body; len(rest) > 0; {
		i := bytes.Index(rest, []byte("\n\n"))
		if i < 0 {
			return nil, fmt.Errorf("%d bytes after the last blank line", len(rest))
		}
		out, rest = append(out, rest[:i+2]), rest[i+2:]
	}
	return out, nil
}

// fixtureCatalog is the tools list of testdata/bench/toolgate.yaml (its
// listeners and upstream are the harness's to set), indented as catalog
// tool entries so it can follow catalogYAML's.
func fixtureCatalog() (string, error) {
	cfg := string(benchFile("toolgate.yaml"))
	_, tools, ok := strings.Cut(cfg, "\ncatalog:\n")
	if !ok {
		return "", fmt.Errorf("testdata/bench/toolgate.yaml has no catalog")
	}
	_, tools, ok = strings.Cut(tools, "  tools:\n")
	if !ok {
		return "", fmt.Errorf("testdata/bench/toolgate.yaml has no catalog.tools")
	}
	return tools, nil
}

// firstText reports whether got[from:] holds the start of the first text
// delta: `"content":"` followed by a character, since an opening chunk may
// carry "content":null or "content":"" and neither is text a user sees.
// A marker at the very end is not judged yet; the caller searches again
// from textSearchFrom after the next read.
func firstText(got []byte, from int) bool {
	for i := from; i < len(got); {
		j := bytes.Index(got[i:], textMarker)
		if j < 0 {
			return false
		}
		k := i + j + len(textMarker)
		if k < len(got) && got[k] != '"' {
			return true
		}
		i = k
	}
	return false
}

// textSearchFrom is where the next firstText search must begin once got
// holds n bytes: far enough back to see a marker cut by a read, and its
// next character.
func textSearchFrom(n int) int { return max(0, n-len(textMarker)) }
