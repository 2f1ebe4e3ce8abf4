package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// textFold stands in for a codec's protocol keys.
var textFold = NewKeyFold("choices", "message", "tool_calls", "arguments", "type", "k")

// fixtureDocs are the shared recordings' documents: each JSON file whole
// and the data of each SSE event.
func fixtureDocs(t testing.TB) [][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "fixtures", "*"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var docs [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(p) {
		case ".json":
			docs = append(docs, data)
		case ".sse":
			for _, line := range strings.Split(string(data), "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
					docs = append(docs, []byte(d))
				}
			}
		}
	}
	return docs
}

// FuzzText holds the one-pass reader to encoding/json: it accepts what
// json.Valid accepts, its tape holds the value encoding/json decodes, it
// finds invalid UTF-8 where utf8.Valid does and folded keys where the
// scan of the bytes does, and Get and Str read what ParseObject and
// Unquote read.
func FuzzText(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, d := range fixtureDocs(f) {
		f.Add(d)
	}
	for _, s := range []string{`{"Choices":1}`, `{"a":{"K":2}}`, "{\"\u212a\":1}", `{"typ\u0045":1}`, "[\"\xe2\x82\"]", `{"a":"\u00e9","a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tx := GetText()
		defer tx.Release()
		ok := tx.Read(data)
		if valid := json.Valid(data); ok != valid && !deep(data) {
			t.Fatalf("Read(%q) = %v, json.Valid = %v", data, ok, valid)
		}
		checkReadable(t, tx, data, ok)
		if !ok {
			return
		}
		if tx.NotUTF8 == utf8.Valid(data) {
			t.Fatalf("%q: NotUTF8 = %v", data, tx.NotUTF8)
		}
		if got, want := textFold.InText(tx), textFold.In(data); got != want {
			t.Fatalf("%q: InText = %v, In = %v", data, got, want)
		}
		if len(tx.Nodes) > 0 && tx.Next(0) != len(tx.Nodes) {
			t.Fatalf("%q: the root's Next is %d of %d nodes", data, tx.Next(0), len(tx.Nodes))
		}
		if !deep(data) {
			if got, want := textValue(t, tx, 0), decodeAny(t, data); !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: tape holds %#v, encoding/json decodes %#v", data, got, want)
			}
		}
		checkMembers(t, tx, data)
	})
}

// deep reports nesting where encoding/json and the reader may differ on
// where the limit falls.
func deep(data []byte) bool {
	return bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) > 5000
}

// checkReadable: Readable gives the error a check of UTF-8, then folded
// keys, then the grammar would give.
func checkReadable(t *testing.T, tx *Text, data []byte, ok bool) {
	t.Helper()
	var want error
	switch {
	case !utf8.Valid(data):
		want = ErrNotUTF8
	case textFold.In(data):
		want = ErrFolded
	case !ok:
		want = ErrSyntax
	}
	if got := tx.Readable(data, textFold); !errors.Is(got, want) || (got == nil) != (want == nil) {
		t.Fatalf("Readable(%q) = %v, want %v", data, got, want)
	}
}

// checkMembers: for a top-level object, Get finds what ParseObject's Get
// finds, and Str and Bytes decode what Unquote does.
func checkMembers(t *testing.T, tx *Text, data []byte) {
	t.Helper()
	obj, err := ParseObject(data)
	if tx.Kind(0) != '{' {
		if err == nil {
			t.Fatalf("%q: ParseObject reads an object the tape does not", data)
		}
		return
	}
	if err != nil {
		t.Fatalf("%q: the tape reads an object ParseObject refuses: %v", data, err)
	}
	for _, m := range obj {
		if !utf8.ValidString(m.Key) {
			// ParseObject keeps such a name's bytes; the tape, as
			// encoding/json, reads them as U+FFFD.
			continue
		}
		i := tx.Get(0, m.Key)
		if !bytes.Equal(tx.Raw(i), obj.Get(m.Key)) {
			t.Fatalf("%q: Get(%q) = %q, ParseObject's %q", data, m.Key, tx.Raw(i), obj.Get(m.Key))
		}
		s, ok := tx.Str(i)
		ws, wok := Unquote(obj.Get(m.Key))
		if ok != wok || s != ws {
			t.Fatalf("%q: Str(%q) = %q, %v; Unquote gives %q, %v", data, m.Key, s, ok, ws, wok)
		}
		if b, ok := tx.Bytes(i); ok != wok || string(b) != ws {
			t.Fatalf("%q: Bytes(%q) = %q, %v", data, m.Key, b, ok)
		}
		if b, ok := Unquoted(obj.Get(m.Key)); ok != wok || string(b) != ws {
			t.Fatalf("%q: Unquoted(%q) = %q, %v", data, m.Key, b, ok)
		}
		if ok && !tx.Is(tx.Get(0, m.Key), ws) {
			t.Fatalf("%q: Is(%q) is false", data, ws)
		}
	}
	for _, m := range obj {
		if v := tx.Get(0, m.Key); v >= 0 && string(tx.Name(v-1, nil)) != m.Key && utf8.ValidString(m.Key) {
			t.Fatalf("%q: the name before %q's value is %q", data, m.Key, tx.Name(v-1, nil))
		}
	}
	checkRepeats(t, tx, obj, data)
	if tx.Get(0, "\x00absent") != -1 || !tx.Null(-1) || tx.Raw(-1) != nil {
		t.Fatalf("%q: an absent member is found", data)
	}
}

// textValue rebuilds the value of node i from the tape through Text's
// own accessors.
func textValue(t *testing.T, tx *Text, i int) any {
	switch tx.Kind(i) {
	case '{':
		m := map[string]any{}
		for j, k := i+1, 0; k < tx.Len(i); k++ {
			name, ok := tx.Str(j)
			if !ok {
				t.Fatalf("name node %d does not decode", j)
			}
			m[name] = textValue(t, tx, j+1)
			j = tx.Next(j + 1)
		}
		return m
	case '[':
		a := []any{}
		for j, k := i+1, 0; k < tx.Len(i); k++ {
			a = append(a, textValue(t, tx, j))
			j = tx.Next(j)
		}
		return a
	case '"':
		s, ok := tx.Str(i)
		if !ok {
			t.Fatalf("string node %d does not decode", i)
		}
		return s
	case '0':
		return json.Number(tx.Raw(i))
	case 't', 'f':
		return tx.Kind(i) == 't'
	}
	return nil
}

// TestTextFixtures: every recorded document reads in one pass, is UTF-8,
// and has no folded key.
func TestTextFixtures(t *testing.T) {
	tx := GetText()
	defer tx.Release()
	docs := fixtureDocs(t)
	if len(docs) < 50 {
		t.Fatalf("%d documents, want the recordings' events too", len(docs))
	}
	for _, d := range docs {
		if err := tx.Readable(d, textFold); err != nil {
			t.Fatalf("%.80q: %v", d, err)
		}
	}
}

// TestTextReadable pins each refusal and its order.
func TestTextReadable(t *testing.T) {
	tx := GetText()
	defer tx.Release()
	for _, c := range []struct {
		doc  string
		want error
	}{
		{`{"choices":[]}`, nil},
		{"{\"a\":\"\xff\"}", ErrNotUTF8},
		{"{\"a\":\"\xff\"", ErrNotUTF8},
		{`{"Choices":[]}`, ErrFolded},
		{`{"x":{"Tool_Calls":[]}}`, ErrFolded},
		{"{\"\u212a\":1}", ErrFolded},
		{`{"Choices":[]`, ErrFolded},
		{"{\"Choices\":\"\xff\"}", ErrNotUTF8},
		{`{"choices":[]`, ErrSyntax},
		{`{"a":"Choices"}`, nil},
		{`{"choic\u0045s":1}`, ErrFolded},
		{`{"choic\u0065s":1}`, nil},
	} {
		if got := tx.Readable([]byte(c.doc), textFold); !errors.Is(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("Readable(%q) = %v, want %v", c.doc, got, c.want)
		}
	}
}

// TestTextPool: a released text keeps its nodes for the next read and
// drops a huge tape.
func TestTextPool(t *testing.T) {
	tx := new(Text)
	if !tx.Read([]byte(`[1,2,3]`)) || len(tx.Nodes) != 4 {
		t.Fatalf("nodes = %v", tx.Nodes)
	}
	tx.Release()
	if tx.Data != nil || len(tx.Nodes) != 0 || cap(tx.Nodes) == 0 {
		t.Fatalf("after release: %q %v", tx.Data, tx.Nodes)
	}
	big := new(Text)
	if !big.Read([]byte("[" + strings.Repeat("0,", maxPooledNodes) + "0]")) {
		t.Fatal("big array refused")
	}
	big.Release()
	if big.Nodes != nil {
		t.Fatalf("a tape of %d nodes is kept", maxPooledNodes+2)
	}
}

// TestTextEscapes: escaped strings of a UTF-8 text, decoded without
// jsontext, read as encoding/json reads them, surrogates included.
func TestTextEscapes(t *testing.T) {
	tx := GetText()
	defer tx.Release()
	for _, s := range []string{
		`"\"a\\b\/c\bd\fe\nf\rg\th"`, `"\u00e9\u20ac"`, `"\ud83d\ude00x"`, `"\ud83d"`, `"\ude00\ud83d"`,
		`"\ud83dx\ude00"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\u0000é\\"`, `"{\"k\": [1, \"v\"]}"`,
	} {
		if !tx.Read([]byte(s)) || tx.NotUTF8 {
			t.Fatalf("%s: not read", s)
		}
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if got, ok := tx.Str(0); !ok || got != want {
			t.Errorf("Str(%s) = %q, encoding/json reads %q", s, got, want)
		}
	}
}

// FuzzMayFold: the word-at-a-time MayFold flags exactly the keys with an
// upper-case ASCII letter, a byte above 0x7F or a backslash.
func FuzzMayFold(f *testing.F) {
	for _, s := range []string{"", "choices", "finish_reason", "Finish_reason", "finish_reasoN", "tool\\u0043alls", "prompt_tokens_details", "@[`{AZaz", "\u212a", "abcdefgh\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		want := false
		for i := 0; i < len(key); i++ {
			if c := key[i]; c >= 0x80 || c == '\\' || 'A' <= c && c <= 'Z' {
				want = true
			}
		}
		if MayFold(key) != want || MayFold([]byte(key)) != want {
			t.Fatalf("MayFold(%q) = %v", key, !want)
		}
	})
}

// checkRepeats holds Repeats and Members to the object's decoded names:
// Repeats finds a name given twice, and Members finds what Get finds
// unless a key it looks up is given twice or in another letter case.
func checkRepeats(t *testing.T, tx *Text, obj Object, data []byte) {
	t.Helper()
	if tx.NotUTF8 {
		return
	}
	seen := map[string]int{}
	twice := false
	for _, m := range obj {
		seen[m.Key]++
		twice = twice || seen[m.Key] > 1
	}
	if len(obj) <= maxRepeatScan && tx.Repeats(0) != twice {
		t.Fatalf("%q: Repeats = %v, a name given twice: %v", data, tx.Repeats(0), twice)
	}
	keys := []string{"a", "k", "type"}
	fold := NewKeyFold(keys...)
	vals, want := make([]int, len(keys)), make([]int, len(keys))
	ok := tx.Members(0, keys, fold, vals)
	for k, key := range keys {
		want[k] = tx.Get(0, key)
	}
	wantOK := true
	for _, m := range obj {
		for _, k := range keys {
			if m.Key == k && seen[k] > 1 || m.Key != k && strings.EqualFold(m.Key, k) || m.Key != k && fold.Folds(m.Key) {
				wantOK = false
			}
		}
	}
	if ok != wantOK || ok && !reflect.DeepEqual(vals, want) {
		t.Fatalf("%q: Members = %v %v, want %v %v", data, ok, vals, wantOK, want)
	}
}
