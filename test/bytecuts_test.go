package test

// What toolgate releases never depends on how the upstream cut its bytes
// (SPEC §7). Each recorded stream of every API goes through the real
// server over real sockets from an upstream that writes it in pieces and
// flushes after each (all at once, one event per write, 7-byte pieces,
// one byte per write, random cuts) and, for events and random cuts,
// waits until toolgate has read each piece before writing the next, so
// that toolgate's reads are cut where the upstream cut (pieces of a few
// bytes cut its reads finely without it). The client must read the same bytes as from the
// unsplit replay, and, for copies edited to carry an invented tool or bad
// arguments, every cut escalates the same call with the same finding.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/cmd/toolgate/app"
	"github.com/toolgate/toolgate/proxy/api/apitest"
	"github.com/toolgate/toolgate/proxy/gemini"
	"github.com/toolgate/toolgate/proxy/sse"
)

// cutCase is one recorded stream and the request that asked for it.
type cutCase struct {
	name    string
	path    string
	request []byte
	answer  []byte
	array   bool // Gemini's JSON-array stream
	// json: a whole answer, not a stream, with its status.
	json   bool
	status int
	// code is the finding every cut must escalate with; "" for a valid
	// recording, which every cut must release as recorded.
	code string
}

// cutUpstream answers every request with its case's recording, written
// in the pieces set for the next request.
type cutUpstream struct {
	srv    *httptest.Server
	mu     sync.Mutex
	c      cutCase
	pieces []int
	// pace: wait until toolgate has read each piece before the next;
	// found: toolgate's socket was found to wait on.
	pace, found bool
}

func newCutUpstream(t testing.TB) *cutUpstream {
	u := &cutUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *cutUpstream) set(c cutCase, pieces []int, pace bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.c, u.pieces, u.pace, u.found = c, pieces, pace, false
}

func (u *cutUpstream) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	u.mu.Lock()
	c, pieces, pace := u.c, slices.Clone(u.pieces), u.pace
	u.mu.Unlock()
	body := c.answer
	ct := "text/event-stream"
	if c.array || c.json {
		ct = "application/json; charset=UTF-8"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(cmp.Or(c.status, http.StatusOK))
	fd := -1
	if pace {
		fd = peerSocket(r.RemoteAddr, u.srv.Listener.Addr().String())
		u.mu.Lock()
		u.found = fd >= 0
		u.mu.Unlock()
	}
	f := w.(http.Flusher)
	for _, n := range pieces {
		if _, err := w.Write(body[:n]); err != nil {
			return
		}
		f.Flush()
		body = body[n:]
		if fd >= 0 {
			waitRead(fd)
		}
	}
}

// waitRead waits, a bounded time, until the socket fd has no byte left
// unread.
func waitRead(fd int) {
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; ; i++ {
		if n, err := unread(fd); err != nil || n == 0 || time.Now().After(deadline) {
			return
		}
		if i < 50 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// cutGate is toolgate with no catalog (the recordings' requests offer
// their tools) and no re-query (a bad call escalates at once), with the
// Vertex AI paths of the Gemini recordings mapped to the Gemini codec.
// Each cut sends the same request again, so escalations are not replayed
// from memory: every one must be judged from the upstream's bytes. It
// takes a testing.TB so that a fuzz target starts one for all its inputs.
func cutGate(tb testing.TB, u *cutUpstream) *gate {
	tb.Helper()
	yaml := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nrecovery:\n  max_attempts: 0\nreprompt:\n  max_attempts: 0\n" +
		"escalation:\n  replay_window: 0s\n" +
		"upstreams:\n  - name: up\n    url: " + u.srv.URL + "\n" +
		"    api_paths:\n" +
		"      \"/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent\": gemini\n" +
		"      \"/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:streamGenerateContent\": gemini\n" +
		"      \"/v1beta1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent\": gemini\n"
	cfg, err := catalog.Parse([]byte(yaml), "cuts.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	snap, err := catalog.Compile(cfg, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	sink := &recordingSink{}
	a, err := app.StartSnapshot(snap, app.Options{Logger: zap.NewNop(), Sink: sink})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	return &gate{URL: "http://" + a.ProxyAddr(), App: a, Sink: sink}
}

// cutResult is what a client read, with what differs between any two
// requests (ids toolgate makes) written alike, and the escalation codes
// recorded for it.
type cutResult struct {
	status  int
	outcome string
	body    string
	codes   string
}

var madeIDs = regexp.MustCompile(`(esc|req)_[0-9A-Za-z_-]{6,}`)

// replay sends c's request through g, whose upstream u writes the
// recording in pieces.
func replay(t testing.TB, g *gate, u *cutUpstream, c cutCase, pieces []int, pace bool) cutResult {
	u.set(c, pieces, pace)
	defer func() {
		u.mu.Lock()
		found := u.found
		u.mu.Unlock()
		if pace && !found && runtime.GOOS == "linux" {
			t.Fatalf("%s: toolgate's socket to the upstream was not found, so its reads are not cut where the upstream cut", c.name)
		}
	}()
	before := len(g.Sink.records())
	req, err := http.NewRequest(http.MethodPost, g.URL+c.path, bytes.NewReader(c.request))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("x-goog-api-key", "k")
	resp, err := fuClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", c.path, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", c.name, err)
	}
	res := cutResult{status: resp.StatusCode, outcome: resp.Header.Get("X-Toolgate-Outcome"), body: madeIDs.ReplaceAllString(string(b), "${1}_ID")}
	// The escalation is recorded after the client's answer ended.
	deadline := time.Now().Add(5 * time.Second)
	for c.code != "" && len(g.Sink.records()) == before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for _, r := range g.Sink.records()[before:] {
		if r.Escalation != nil {
			res.codes += strings.Join(r.Escalation.Codes, ",") + ";"
		}
	}
	return res
}

// events is the length of each event of c's recording; of each line
// for a whole answer.
func (c cutCase) events() []int {
	var out []int
	if c.json {
		for _, line := range bytes.SplitAfter(c.answer, []byte("\n")) {
			if len(line) > 0 {
				out = append(out, len(line))
			}
		}
		return out
	}
	if c.array {
		rd := gemini.NewArrayReader(bytes.NewReader(c.answer), 1<<20)
		for rd.Next() {
			out = append(out, len(rd.Event().Raw))
		}
		return out
	}
	rd := sse.NewReader(bytes.NewReader(c.answer), 1<<20)
	for rd.Next() {
		out = append(out, len(rd.Event().Raw))
	}
	return out
}

// cutsOf are the ways the upstream cuts c's recording.
func cutsOf(c cutCase, random int, seed uint64) []namedCut {
	size := len(c.answer)
	out := []namedCut{{"one event per write", c.events(), true}, {"7-byte pieces", piecesOf(size, 7), false}, {"one byte per write", piecesOf(size, 1), false}}
	rng := rand.New(rand.NewPCG(seed, uint64(size)))
	for i := range random {
		var p []int
		for left := size; left > 0; {
			n := min(left, 1+rng.IntN(1+rng.IntN(300)))
			p = append(p, n)
			left -= n
		}
		out = append(out, namedCut{fmt.Sprintf("random cuts %d", i), p, true})
	}
	return out
}

// seedOf is a case's own seed, so a failing cut comes again.
func seedOf(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}

type namedCut struct {
	name   string
	pieces []int
	pace   bool
}

func piecesOf(size, n int) []int {
	var out []int
	for ; size > 0; size -= n {
		out = append(out, min(n, size))
	}
	return out
}

// withStream is a request body with "stream": true.
func withStream(t testing.TB, body []byte) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	m["stream"] = json.RawMessage("true")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readRepo(t testing.TB, parts ...string) []byte {
	b, err := os.ReadFile(filepath.Join(parts...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cutCases are every recorded stream of the four APIs' codecs, and the
// copies edited to carry a bad call.
func cutCases(t testing.TB) []cutCase {
	var out []cutCase
	for _, a := range []struct{ api, dir, path string }{
		{"chat", "openaichat", "/v1/chat/completions"},
		{"messages", "anthropic", "/v1/messages"},
		{"responses", "responses", "/v1/responses"},
	} {
		req := withStream(t, readRepo(t, "..", "proxy", a.dir, "testdata", "request.json"))
		files, _ := filepath.Glob(filepath.Join("..", "proxy", a.dir, "testdata", "*.sse"))
		for _, f := range files {
			answer := readRepo(t, f)
			c := cutCase{name: a.api + "/" + filepath.Base(f), path: a.path, request: req, answer: answer}
			out = append(out, c)
			// An invented tool, everywhere the stream names the call.
			bad := c
			bad.name += "/invented tool"
			bad.answer, bad.code = bytes.ReplaceAll(answer, []byte("get_current_weather"), []byte("get_current_weathr")), "unknown_tool"
			out = append(out, bad)
			// Arguments out of the schema's enum, in every fragment and
			// every repetition.
			if bytes.Contains(answer, []byte("elsius")) {
				bad = c
				bad.name += "/bad arguments"
				bad.answer, bad.code = bytes.ReplaceAll(answer, []byte("elsius"), []byte("elvin")), "schema_violation"
				out = append(out, bad)
			}
		}
	}
	for _, r := range recordings {
		if !strings.Contains(r.path, "stream") {
			continue
		}
		out = append(out, cutCase{name: "gemini/" + r.file, path: r.path, request: requestOf(t, r),
			answer: readRepo(t, recordedDir, r.file), array: !strings.HasSuffix(r.file, ".sse")})
	}
	for _, e := range editedRecordings {
		if !strings.Contains(e.rec.path, "stream") {
			continue
		}
		bad := bytes.Replace(readRepo(t, recordedDir, e.rec.file), []byte(e.old), []byte(e.new), 1)
		out = append(out, cutCase{name: "gemini/" + e.rec.file + "/" + e.name, path: e.rec.path, request: requestOf(t, e.rec),
			answer: bad, array: !strings.HasSuffix(e.rec.file, ".sse"), code: e.code})
	}
	return out
}

// requestOf is the request a Gemini recording answered.
func requestOf(t testing.TB, r recording) []byte {
	if r.request != "" {
		return []byte(r.request)
	}
	return readRepo(t, recordedDir, strings.TrimSuffix(strings.TrimSuffix(r.file, ".sse"), ".json")+".request.json")
}

// checkWhole checks the unsplit replay of c: a valid recording reaches
// the client as recorded, an edited one escalates with its finding.
func checkWhole(t testing.TB, c cutCase, whole cutResult) {
	if c.code == "" {
		if whole.status != cmp.Or(c.status, 200) || whole.body != string(c.answer) || whole.codes != "" {
			t.Fatalf("%s read whole: status %d outcome %q escalations %q, body\n%s", c.name, whole.status, whole.outcome, whole.codes, whole.body)
		}
		return
	}
	if whole.codes == "" || !strings.Contains(whole.codes, c.code) || whole.body == string(c.answer) {
		t.Fatalf("%s read whole: escalations %q, want %s; status %d body\n%s", c.name, whole.codes, c.code, whole.status, whole.body)
	}
}

func TestStreamCutsReleaseTheSame(t *testing.T) {
	u := newCutUpstream(t)
	g := cutGate(t, u)
	random := 3
	if testing.Short() {
		random = 1
	}
	for _, c := range cutCases(t) {
		t.Run(c.name, func(t *testing.T) {
			whole := replay(t, g, u, c, []int{len(c.answer)}, false)
			checkWhole(t, c, whole)
			for _, cut := range cutsOf(c, random, seedOf(c.name)) {
				// Pieces of a few bytes are cut finely enough by
				// themselves; events and random cuts wait for each piece
				// to be read.
				pace := cut.pace
				got := replay(t, g, u, c, cut.pieces, pace)
				if got != whole {
					t.Errorf("%s: status %d outcome %q escalations %q, body\n%s\nwhole: status %d outcome %q escalations %q, body\n%s",
						cut.name, got.status, got.outcome, got.codes, got.body, whole.status, whole.outcome, whole.codes, whole.body)
				}
			}
		})
	}
}

// Every Gemini recording, streamed or whole, Vertex AI's streamed
// arguments among them, replays through a socket the upstream writes one
// event (a whole answer: one line) at a time to, flushing after each and
// waiting until toolgate read it: the client reads it byte for byte, with
// its status, as from the unsplit replay, and the recorded
// UNEXPECTED_TOOL_CALL escalates its undeclared call either way.
func TestGeminiRecordingsEventByEvent(t *testing.T) {
	u := newCutUpstream(t)
	g := cutGate(t, u)
	all := append(slices.Clone(recordings), recording{"generate_vertex_unexpected_tool_call_gemini-3-flash.json", "",
		"/v1beta1/projects/p/locations/global/publishers/google/models/gemini-3-flash-preview:generateContent", 200})
	if len(all) != 17 {
		t.Fatalf("%d recordings, want the 17 of testdata/recorded", len(all))
	}
	for _, r := range all {
		c := cutCase{name: r.file, path: r.path, request: requestOf(t, r), answer: readRepo(t, recordedDir, r.file), status: r.status}
		c.array = strings.HasPrefix(r.file, "array_")
		c.json = !c.array && !strings.HasSuffix(r.file, ".sse")
		if strings.Contains(r.file, "unexpected_tool_call") {
			c.code = "unknown_tool"
		}
		t.Run(r.file, func(t *testing.T) {
			whole := replay(t, g, u, c, []int{len(c.answer)}, false)
			checkWhole(t, c, whole)
			if got := replay(t, g, u, c, c.events(), true); got != whole {
				t.Errorf("one event per write: status %d outcome %q escalations %q, body\n%s\nwhole: status %d outcome %q escalations %q, body\n%s",
					got.status, got.outcome, got.codes, got.body, whole.status, whole.outcome, whole.codes, whole.body)
			}
		})
	}
}

// FuzzStreamCuts replays a recorded stream, valid or edited, cut where
// the fuzzer says (each byte of cuts is the length of one piece, its value
// plus one, the last repeated to the end), and requires what the unsplit
// replay released. Pieces are waited on until read unless there are more
// than a few hundred of them.
func FuzzStreamCuts(f *testing.F) {
	cases := cutCases(f)
	u := newCutUpstream(f)
	g := cutGate(f, u)
	for i := range cases {
		f.Add(uint8(i), []byte{byte(40 + 53*i), 2, 130})
	}
	wholes := make([]*cutResult, len(cases))
	f.Fuzz(func(t *testing.T, which uint8, cuts []byte) {
		k := int(which) % len(cases)
		c := cases[k]
		if wholes[k] == nil {
			w := replay(t, g, u, c, []int{len(c.answer)}, false)
			checkWhole(t, c, w)
			wholes[k] = &w
		}
		pieces := apitest.Pieces(cuts, len(c.answer))
		if got := replay(t, g, u, c, pieces, len(pieces) <= 400); got != *wholes[k] {
			t.Fatalf("%s cut %v: status %d outcome %q escalations %q, body\n%s\nwhole: status %d outcome %q escalations %q, body\n%s",
				c.name, cuts, got.status, got.outcome, got.codes, got.body, wholes[k].status, wholes[k].outcome, wholes[k].codes, wholes[k].body)
		}
	})
}
