package gemini

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

var abstainTool = neutral.Offered{Name: "none_fits", Description: "d", Parameters: []byte(`{"type":"object","properties":{"reason":{"type":"string"}},"required":["reason"]}`)}

// declared lists the function names a request body declares.
func declared(t *testing.T, body []byte) []string {
	t.Helper()
	req, err := newCodec().DecodeRequest("", body)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range req.Offered {
		names = append(names, o.Name)
	}
	return names
}

// After InjectTool the codec's request is the injected one: re-queries
// offer the abstain tool, and an answer that calls it keeps the order of
// its parts. Another codec of the same API sees nothing of it.
func TestInjectToolIsTheCodecsRequest(t *testing.T) {
	cd, _, _ := parallelTurn(t)
	other := newCodec()
	if _, err := other.DecodeRequest("", readSample(t, "request.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := cd.InjectTool(abstainTool); err != nil {
		t.Fatal(err)
	}
	resp, err := cd.DecodeAnswer([]byte(`{"candidates":[{"content":{"role":"model","parts":[` +
		`{"functionCall":{"name":"get_current_weather","args":{"location":"Boston, MA"}}},` +
		`{"functionCall":{"name":"none_fits","args":{"reason":"no tool"}}}]},"finishReason":"STOP"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Choices[0].Calls
	if len(calls) != 2 || calls[0].Name != "get_current_weather" || calls[1].Name != "none_fits" || calls[1].ID != syntheticID+"1" {
		t.Fatalf("calls %+v", calls)
	}
	q := &neutral.Query{Kind: neutral.KindRecovery, History: []neutral.Round{{Turn: resp.Choices[0], Replies: []neutral.CallReply{
		{CallID: calls[0].ID, Content: "ok"}, {CallID: calls[1].ID, Content: "noted"},
	}}}}
	body, err := cd.ReQuery(resp, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(declared(t, body), ","); got != "add,multiply,none_fits" {
		t.Errorf("re-query declares %s", got)
	}
	body, err = other.ReQuery(resp, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(declared(t, body), ","); got != "get_current_weather,get_stock_price" {
		t.Errorf("another request's codec declares %s", got)
	}
}

// Vouching holds what the user wrote and what functions returned, never
// the model's words; History pairs calls and responses by id, else by
// name and order within the model turn before them.
func TestDecodeRequestVouchingAndHistory(t *testing.T) {
	body := `{"contents":[` +
		`{"role":"user","parts":[{"text":"ship order A1"}]},` +
		`{"role":"model","parts":[{"text":"maybe B7"},{"functionCall":{"name":"get_order","args":{"id":"A1"}}},{"functionCall":{"id":"c1","name":"cancel"}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"get_order","response":{"output":"shipped"}}},{"functionResponse":{"id":"c1","name":"cancel","response":{"error":"denied"}}}]}]}`
	req, err := newCodec().DecodeRequest("/v1beta/models/m:generateContent", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	vouch := strings.Join(req.Vouching, "|")
	if !strings.Contains(vouch, "ship order A1") || !strings.Contains(vouch, `{"output":"shipped"}`) || strings.Contains(vouch, "B7") {
		t.Errorf("vouching %q", req.Vouching)
	}
	if req.UserText != "ship order A1\n" {
		t.Errorf("user text %q", req.UserText)
	}
	h := req.History
	if len(h.Calls) != 2 || h.Calls[0].ID != "get_order#1.1" || string(h.Calls[0].Args) != `{"id":"A1"}` || h.Calls[1].ID != "c1" || string(h.Calls[1].Args) != "{}" {
		t.Fatalf("calls %+v", h.Calls)
	}
	if r, ok := h.Result("get_order#1.1"); !ok || r.IsError || r.Text != `{"output":"shipped"}` {
		t.Errorf("paired by name: %+v %v", r, ok)
	}
	if r, ok := h.Result("c1"); !ok || !r.IsError {
		t.Errorf("paired by id: %+v %v", r, ok)
	}
}

func TestEncodeError(t *testing.T) {
	got := string(newCodec().EncodeError(neutral.Failure{Status: 502, Code: neutral.CodeUpstream, Message: "down", Retryable: true}))
	want := `{"error":{"code":502,"message":"down","status":"UNAVAILABLE","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"upstream_error","domain":"toolgate"}]}}`
	if got != want {
		t.Errorf("envelope\n%s\nwant\n%s", got, want)
	}
	for _, c := range []struct {
		f    neutral.Failure
		want string
	}{
		{neutral.Failure{Status: 401, Code: neutral.CodeAuth}, "UNAUTHENTICATED"},
		{neutral.Failure{Status: 413, Code: neutral.CodeRequestTooLarge}, "INVALID_ARGUMENT"},
		{neutral.Failure{Status: 408, Code: neutral.CodeRequestTimeout}, "DEADLINE_EXCEEDED"},
		{neutral.Failure{Status: 504, Code: neutral.CodeUpstreamTimeout}, "DEADLINE_EXCEEDED"},
		{neutral.Failure{Status: 500, Code: neutral.CodeInternal}, "INTERNAL"},
		{neutral.Failure{Status: 400, Code: "path_separator", Refusal: true}, "INVALID_ARGUMENT"},
		{neutral.Failure{Status: 404, Code: "path_unknown", Refusal: true}, "NOT_FOUND"},
		{neutral.Failure{Status: 405, Code: "method", Refusal: true}, "INVALID_ARGUMENT"},
		{neutral.Failure{Status: 415, Code: "content_encoding", Refusal: true}, "INVALID_ARGUMENT"},
		{neutral.Failure{Status: 405, Code: "method"}, "INTERNAL"},
	} {
		var w struct {
			Error struct {
				Code    int              `json:"code"`
				Status  string           `json:"status"`
				Details []map[string]any `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal(newCodec().EncodeError(c.f), &w); err != nil {
			t.Fatal(err)
		}
		if w.Error.Code != c.f.Status || w.Error.Status != c.want || w.Error.Details[0]["reason"] != string(c.f.Code) {
			t.Errorf("%+v: %+v, want %s", c.f, w.Error, c.want)
		}
	}
}

// An abstention is text without an escalation object; under a Replace
// that changes no call, a Keep, or no action at all a candidate keeps its
// bytes.
func TestEncodeAnswerAbstainAndKept(t *testing.T) {
	cd, _, resp := parallelTurn(t)
	out, err := cd.EncodeAnswer(resp, []neutral.Action{{Kind: neutral.Respond, Text: "none of these fit"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"parts":[{"text":"none of these fit"}],"role":"model"},"finishReason":"STOP"`)) ||
		bytes.Contains(out, []byte("toolgate_escalation")) || bytes.Contains(out, []byte("functionCall")) {
		t.Errorf("abstained %s", out)
	}
	calls := resp.Choices[0].Calls
	// Each candidate's bytes, as the array between them is written anew.
	cands := func(b []byte) string {
		obj, err := jsonx.ParseObject(b)
		if err != nil {
			t.Fatal(err)
		}
		elems, err := jsonx.ParseArray(obj.Get("candidates"))
		if err != nil {
			t.Fatal(err)
		}
		return string(bytes.Join(elems, []byte("\x00")))
	}
	orig := cands(resp.Body)
	for _, acts := range [][]neutral.Action{
		{{Kind: neutral.Replace, Calls: calls, Changed: make([]bool, len(calls))}},
		{{Kind: neutral.Keep}},
		nil,
	} {
		out, err := cd.EncodeAnswer(resp, acts)
		if err != nil || cands(out) != orig {
			t.Errorf("%+v changed the candidate (%v):\n%s", acts, err, out)
		}
	}
}

// The JSON-array framing is chosen by the verb of the path the codec
// decoded, and only for an answer that is not SSE.
func TestFramedStreamFollowsDecodedPath(t *testing.T) {
	jsonH := http.Header{"Content-Type": {"application/json; charset=UTF-8"}}
	for _, c := range []struct {
		path string
		body string
		h    http.Header
		want bool
	}{
		{"/v1beta/models/m:streamGenerateContent", `{"contents":[]}`, jsonH, true},
		// A request toolgate cannot read is forwarded; its answer is
		// still followed as the path frames it.
		{"/v1beta/models/m:streamGenerateContent", `{"contents":`, jsonH, true},
		{"/v1beta/models/m:streamGenerateContent", `{"contents":[]}`, http.Header{"Content-Type": {"text/event-stream"}}, false},
		{"/v1beta/models/m:generateContent", `{"contents":[]}`, jsonH, false},
		{"", "", jsonH, false},
	} {
		cd := newCodec()
		if c.path != "" {
			_, _ = cd.DecodeRequest(c.path, []byte(c.body))
		}
		st, rd, ok := cd.NewFramedStream(c.h, strings.NewReader("[]"))
		if ok != c.want || (st != nil) != c.want || (rd != nil) != c.want {
			t.Errorf("%q %v: framed %v", c.path, c.h, ok)
		}
	}
}

// The codec's own files import from toolgate only the contract, the
// neutral values, SSE, jsonx and geminischema.
func TestImports(t *testing.T) {
	allowed := map[string]bool{
		"github.com/toolgate/toolgate/neutral":               true,
		"github.com/toolgate/toolgate/proxy/api":             true,
		"github.com/toolgate/toolgate/proxy/sse":             true,
		"github.com/toolgate/toolgate/internal/jsonx":        true,
		"github.com/toolgate/toolgate/internal/geminischema": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/toolgate/") && !allowed[p] {
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
	if n == 0 {
		t.Fatal("no source files found")
	}
}
