package jsonx

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// The benchmarks read a real Chat Completions answer (2.4 KB, pretty
// printed, two tool calls) and one streamed tool-call delta event, the two
// shapes every proxied answer goes through.

func benchData(b *testing.B, name string) []byte {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// benchArguments is the first call's arguments string of answer.json, raw.
func benchArguments(b *testing.B) []byte {
	b.Helper()
	root, err := ParseObject(benchData(b, "answer.json"))
	if err != nil {
		b.Fatal(err)
	}
	var v []byte = root.Get("choices")
	for _, step := range []string{"", "message", "tool_calls", "", "function", "arguments"} {
		if step == "" {
			elems, err := ParseArray(v)
			if err != nil || len(elems) == 0 {
				b.Fatalf("no element in %s: %v", v, err)
			}
			v = elems[0]
			continue
		}
		obj, err := ParseObject(v)
		if err != nil {
			b.Fatal(err)
		}
		v = obj.Get(step)
	}
	if len(v) < 700 || v[0] != '"' {
		b.Fatalf("arguments = %s", v)
	}
	return v
}

func BenchmarkParseObjectAnswer(b *testing.B) {
	data := benchData(b, "answer.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseObject(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseObjectDelta is how a stream reads each event: one slice
// reused across events.
func BenchmarkParseObjectDelta(b *testing.B) {
	data := benchData(b, "delta.json")
	dst := make(Object, 0, 16)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		obj, err := ParseObjectInto(dst, data)
		if err != nil || len(obj) != 7 {
			b.Fatal(obj, err)
		}
	}
}

func BenchmarkParseArrayChoices(b *testing.B) {
	root, err := ParseObject(benchData(b, "answer.json"))
	if err != nil {
		b.Fatal(err)
	}
	data := root.Get("choices")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if elems, err := ParseArray(data); err != nil || len(elems) != 1 {
			b.Fatal(elems, err)
		}
	}
}

// BenchmarkSplitDelta walks a checked delta event down to the call's
// arguments, as the stream's fast path does after ParseObjectInto.
func BenchmarkSplitDelta(b *testing.B) {
	root, err := ParseObject(benchData(b, "delta.json"))
	if err != nil {
		b.Fatal(err)
	}
	choices := root.Get("choices")
	var arr [][]byte
	var obj Object
	// first splits an array and returns its first element; get splits an
	// object and returns a member.
	first := func(v []byte) []byte {
		if arr, err = SplitArrayInto(arr, v); err != nil || len(arr) == 0 {
			b.Fatal(string(v), err)
		}
		return arr[0]
	}
	get := func(v []byte, key string) []byte {
		if obj, err = SplitObjectInto(obj, v); err != nil {
			b.Fatal(string(v), err)
		}
		return obj.Get(key)
	}
	b.ReportAllocs()
	for b.Loop() {
		call := first(get(get(first(choices), "delta"), "tool_calls"))
		if args := get(get(call, "function"), "arguments"); len(args) == 0 {
			b.Fatal("no arguments")
		}
	}
}

func BenchmarkUnquoteArguments(b *testing.B) {
	raw := benchArguments(b)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Unquote(raw); !ok {
			b.Fatal("not a string")
		}
	}
}

func BenchmarkDecodeArguments(b *testing.B) {
	args, ok := Unquote(benchArguments(b))
	if !ok {
		b.Fatal("not a string")
	}
	data := []byte(args)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := Decode(data); !ok {
			b.Fatal("Decode refused the arguments")
		}
	}
}

// benchKeys are the protocol keys the proxy looks for folded copies of.
var benchKeys = NewKeyFold(
	"choices", "message", "delta", "tool_calls", "function", "custom", "name", "arguments", "input",
	"id", "type", "index", "content", "finish_reason", "usage", "error", "output", "call_id", "item",
	"output_index", "content_block", "partial_json", "stop_reason", "response", "status", "role", "text",
)

func BenchmarkKeyFoldInAnswer(b *testing.B) {
	data := benchData(b, "answer.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if benchKeys.In(data) {
			b.Fatal("folded key found")
		}
	}
}

// BenchmarkKeyFoldInStream is In over each of the 40 events of one
// streamed answer, as the proxy checks every event.
func BenchmarkKeyFoldInStream(b *testing.B) {
	var events [][]byte
	for _, line := range bytes.Split(benchData(b, "answer.sse"), []byte("\n")) {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok && data[0] == '{' {
			events = append(events, data)
		}
	}
	if len(events) != 39 {
		b.Fatalf("%d JSON events, want 39", len(events))
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range events {
			if benchKeys.In(ev) {
				b.Fatal("folded key found")
			}
		}
	}
}

func BenchmarkKeyFoldInDelta(b *testing.B) {
	data := benchData(b, "delta.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if benchKeys.In(data) {
			b.Fatal("folded key found")
		}
	}
}

// BenchmarkReadAnswerThreePasses is what reading answer.json took before
// the one-pass reader: a UTF-8 pass, the folded-key pass and the checked
// split of the top level (nested values are split again on top of this).
func BenchmarkReadAnswerThreePasses(b *testing.B) {
	data := benchData(b, "answer.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if !utf8.Valid(data) || benchKeys.In(data) {
			b.Fatal("refused")
		}
		if _, err := ParseObject(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadAnswerOnePass is the same checks in one pass, with every
// value's place found: nothing is split again.
func BenchmarkReadAnswerOnePass(b *testing.B) {
	data := benchData(b, "answer.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		tx := GetText()
		if err := tx.Readable(data, benchKeys); err != nil {
			b.Fatal(err)
		}
		tx.Release()
	}
}

// BenchmarkReadStreamOnePass is Read and the folded-key check of each of
// the 39 JSON events of answer.sse, what Feed does before it reads the
// event's fields from the tape.
func BenchmarkReadStreamOnePass(b *testing.B) {
	var events [][]byte
	for _, line := range bytes.Split(benchData(b, "answer.sse"), []byte("\n")) {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok && data[0] == '{' {
			events = append(events, data)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range events {
			tx := GetText()
			if !tx.Read(ev) || benchKeys.InText(tx) {
				b.Fatal("refused")
			}
			tx.Release()
		}
	}
}
