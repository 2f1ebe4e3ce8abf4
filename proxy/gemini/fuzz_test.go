package gemini

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// splitReader hands out data in pieces whose sizes come from cuts, so a
// fuzzer chooses where reads end.
type splitReader struct {
	data []byte
	cuts []byte
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.cuts) > 0 {
		n = int(r.cuts[0])%16 + 1
		r.cuts = r.cuts[1:]
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// recordedFiles are the recordings of testdata/recorded whose names start
// with prefix.
func recordedFiles(f *testing.F, prefix string) [][]byte {
	names, err := filepath.Glob(filepath.Join("testdata", "recorded", prefix+"*"))
	if err != nil || len(names) == 0 {
		f.Fatalf("no recordings %s*: %v", prefix, err)
	}
	var out [][]byte
	for _, n := range names {
		if strings.HasSuffix(n, ".request.json") {
			continue
		}
		out = append(out, readSample(f, strings.TrimPrefix(n, "testdata/")))
	}
	return out
}

// addStreamSeeds seeds with every recorded stream of both framings.
func addStreamSeeds(f *testing.F) {
	for _, b := range recordedFiles(f, "sse_") {
		f.Add(b, []byte{3, 1, 4, 1, 5}, false)
	}
	for _, b := range recordedFiles(f, "array_") {
		f.Add(b, []byte{9, 2, 6}, true)
	}
	f.Add([]byte(`[{"a":"]}\"["}`+"\n,\r\n{}]\n"), []byte{0, 0, 1}, true)
	f.Add([]byte(`data: {"candidates":[{"index":1,"content":{"parts":[{"text":"a"},{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP"}]}`+"\n\n"), []byte{7}, false)
}

// FuzzArrayReader: however reads are split, the reader's events carry the
// input byte for byte, and it accepts exactly the arrays of objects.
func FuzzArrayReader(f *testing.F) {
	addStreamSeeds(f)
	f.Fuzz(func(t *testing.T, body, cuts []byte, _ bool) {
		rd := NewArrayReader(&splitReader{data: body, cuts: cuts}, 1<<20)
		var raw []byte
		elems := 0
		for rd.Next() {
			ev := rd.Event()
			raw = append(raw, ev.Raw...)
			if ev.Data != nil {
				elems++
				if !json.Valid(ev.Data) || ev.Data[0] != '{' {
					t.Fatalf("element %q", ev.Data)
				}
			}
		}
		want, err := jsonx.ParseArray(body)
		objects := err == nil
		for _, e := range want {
			if e[0] != '{' {
				objects = false
			}
		}
		if rd.Err() != nil {
			if objects {
				t.Fatalf("refused the array of objects %q: %v", body, rd.Err())
			}
			return
		}
		if !objects || elems != len(want) || !bytes.Equal(raw, body) {
			t.Fatalf("read %q as %d elements, raw %q", body, elems, raw)
		}
	})
}

// FuzzStream feeds either framing, split anywhere: it never panics, a
// complete stream kept as it is encodes to its held bytes, and one whose
// every candidate is escalated encodes without error, in the array
// framing as one valid JSON array.
func FuzzStream(f *testing.F) {
	addStreamSeeds(f)
	f.Fuzz(func(t *testing.T, body, cuts []byte, array bool) {
		fd := feedAll(t, array, &splitReader{data: body, cuts: cuts})
		if fd.err != nil || !fd.done {
			return
		}
		turns := fd.st.Turns()
		if fd.holdAt < 0 {
			return
		}
		keep := make([]neutral.Action, len(turns))
		if out, err := fd.st.Encode(fd.held(), keep, fd.sent()); err != nil || !bytes.Equal(out, joinRaw(fd.events[fd.holdAt:])) {
			t.Fatalf("kept stream re-encoded (%v):\n%q\nheld\n%q", err, out, joinRaw(fd.events[fd.holdAt:]))
		}
		// Every call replaced: the rendered stream reads as those calls,
		// streamed ones written whole.
		repl := make([]neutral.Action, len(turns))
		for i, tn := range turns {
			repl[i] = neutral.Action{Kind: neutral.Replace}
			for _, c := range tn.Calls {
				c.Args = []byte(`{"x":1}`)
				repl[i].Calls = append(repl[i].Calls, c)
				repl[i].Changed = append(repl[i].Changed, true)
			}
		}
		out, err := fd.st.Encode(fd.held(), repl, fd.sent())
		if err != nil {
			t.Fatalf("render with every call replaced: %v", err)
		}
		again := feedAll(t, array, bytes.NewReader(append(joinRaw(fd.events[:fd.holdAt]), out...)))
		if again.err != nil || !again.done {
			t.Fatalf("rendered stream unreadable (%v, done %v): %q", again.err, again.done, out)
		}
		for i, tn := range again.st.Turns() {
			if i >= len(turns) || len(tn.Calls) != len(turns[i].Calls) {
				t.Fatalf("rendered %q reads as other calls", out)
			}
			for _, c := range tn.Calls {
				if string(c.Args) != `{"x":1}` {
					t.Fatalf("rendered %q: call %s %s", out, c.Name, c.Args)
				}
			}
		}
		actions := make([]neutral.Action, len(turns))
		for i := range turns {
			esc := &neutral.Escalated{ID: "esc_f", Body: []byte(`{"id":"esc_f"}`), Text: "x"}
			actions[i] = neutral.Action{Kind: neutral.Respond, Text: esc.Text, Escalation: esc}
		}
		out, err = fd.st.Encode(fd.held(), actions, fd.sent())
		if err != nil {
			t.Fatalf("render: %v", err)
		}
		if array {
			whole := append(joinRaw(fd.events[:fd.holdAt]), out...)
			if !json.Valid(whole) {
				t.Fatalf("rendered array is not JSON: %q", whole)
			}
		}
	})
}

// FuzzDecodeAnswer: any answer that is read gives calls with an id and
// arguments, and encodes with every call replaced.
func FuzzDecodeAnswer(f *testing.F) {
	for _, b := range recordedFiles(f, "generate_") {
		f.Add(b)
	}
	f.Add(readSample(f, "recorded/error_403_permission_denied.json"))
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"id":"a","name":"f","args":[1]}}]},"finishReason":"MAX_TOKENS"}]}`))
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","willContinue":true}},{"functionCall":{"partialArgs":[{"jsonPath":"$.a[0]['b']","stringValue":"x","willContinue":true}],"willContinue":true}},{"functionCall":{}}]},"finish_reason":9}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		cd := newCodec()
		resp, err := cd.DecodeAnswer(body)
		if err != nil {
			return
		}
		actions := make([]neutral.Action, len(resp.Choices))
		for i, tn := range resp.Choices {
			act := neutral.Action{Kind: neutral.Replace}
			for _, c := range tn.Calls {
				if c.ID == "" || len(c.Args) == 0 {
					t.Fatalf("call %+v", c)
				}
				c.Args = []byte(`{"x":1}`)
				act.Calls = append(act.Calls, c)
				act.Changed = append(act.Changed, true)
			}
			actions[i] = act
		}
		out, err := cd.EncodeAnswer(resp, actions)
		if err != nil {
			t.Fatalf("render of a readable answer: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("rendered invalid JSON %q", out)
		}
		// What was rendered reads as the replaced calls, streamed ones
		// written whole.
		again, err := newCodec().DecodeAnswer(out)
		if err != nil {
			t.Fatalf("rendered answer unreadable (%v): %s", err, out)
		}
		for i, tn := range again.Choices {
			if i >= len(resp.Choices) || len(tn.Calls) != len(resp.Choices[i].Calls) {
				t.Fatalf("rendered %s reads as other calls", out)
			}
			for _, c := range tn.Calls {
				if string(c.Args) != `{"x":1}` {
					t.Fatalf("rendered %s: call %s %s", out, c.Name, c.Args)
				}
			}
		}
	})
}

// FuzzDecodeRequest: any request is read without a panic, and every tool
// it offers has a schema that is JSON. Seeded with every recorded request
// (camelCase, snake_case, integer enums).
func FuzzDecodeRequest(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join("testdata", "recorded", "*.request.json"))
	for _, n := range names {
		f.Add(readSample(f, strings.TrimPrefix(n, "testdata/")))
	}
	f.Add([]byte(`{"tools":[{"function_declarations":[{"name":"f","parameters":{"type":6,"any_of":[{"type":1}]}}]}],"tool_config":{"function_calling_config":{"mode":2}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := newCodec().DecodeRequest("/v1beta/models/m:generateContent", body)
		if err != nil {
			return
		}
		for _, o := range req.Offered {
			if len(o.Parameters) > 0 && !json.Valid(o.Parameters) {
				t.Fatalf("%s offered with schema %s", o.Name, o.Parameters)
			}
		}
	})
}
