package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	`{}`, `[]`, `{"a":1}`, `{"a":[1,{"b":null}],"c":"d"}`, ` { "k" : "v" } `,
	`{"a\"b":"\u00e9","c":[true,false]}`, `{"a":1,"a":2}`, `{"a":tru}`, `{"a":01}`,
	`{"a":"x\qy"}`, `{"a":-}`, `{"a":1} x`, `{"a":[[[[[]]]]]}`, "{\"\xff\":\"\xfe\"}",
	`{"choices":[{"message":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}`,
	`[1,"a",{"b":[2]},[],null]`, `[1,]`, `{"a":"\ud800"}`, `[1E700]`, `{"a":-1e-999}`,
}

// decodeAny decodes JSON the way clients will read it.
func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	// UseNumber: json.Valid accepts numbers no float64 holds (1E700), and
	// the splitters keep number bytes as sent, so compare them as text.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// FuzzParseObject: whatever the bytes, ParseObject must not panic. On input
// that json.Valid accepts, a successful parse re-encodes to valid JSON with
// the same value, every member's value is a sub-slice of the input, and Set
// and Delete do what they say. ParseObject checks structure only, so on
// input json.Valid rejects nothing more is required.
func FuzzParseObject(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := ParseObject(data)
		if err != nil {
			return
		}
		for _, m := range obj {
			if len(m.Value) == 0 || !bytes.Contains(data, m.Value) {
				t.Fatalf("value %q of %q is not taken from the input", m.Value, m.Key)
			}
		}
		checkSplit(t, obj)
		out := obj.Bytes()
		if !json.Valid(data) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Bytes() of valid %q is invalid: %q", data, out)
		}
		if want, got := decodeAny(t, data), decodeAny(t, out); !reflect.DeepEqual(want, got) {
			t.Fatalf("round trip changed the value:\n in  %q\n out %q", data, out)
		}
		for _, m := range obj {
			if v := obj.Get(m.Key); v == nil {
				t.Fatalf("Get(%q) = nil", m.Key)
			}
			del := obj.Delete(m.Key)
			if del.Has(m.Key) {
				t.Fatalf("Delete(%q) left it", m.Key)
			}
			if !json.Valid(del.Bytes()) {
				t.Fatalf("Delete made invalid JSON: %q", del.Bytes())
			}
			set := append(Object(nil), obj...).Set(m.Key, []byte(`"#"`))
			var back map[string]json.RawMessage
			if err := json.Unmarshal(set.Bytes(), &back); err != nil {
				t.Fatalf("Set made invalid JSON: %v", err)
			}
			if string(back[decodedKey(t, m.Key)]) != `"#"` {
				t.Fatalf("after Set(%q) a decoder reads %s", m.Key, back[m.Key])
			}
		}
	})
}

// decodedKey is the key as encoding/json will name it after re-encoding
// (invalid UTF-8 becomes U+FFFD).
func decodedKey(t *testing.T, k string) string {
	var s string
	if err := json.Unmarshal(String(k), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzParseArray holds ParseArray to the same contract as ParseObject.
func FuzzParseArray(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		elems, err := ParseArray(data)
		if err != nil || !json.Valid(data) {
			return
		}
		out := AppendArray(nil, elems)
		if !json.Valid(out) {
			t.Fatalf("AppendArray of valid %q is invalid: %q", data, out)
		}
		if want, got := decodeAny(t, data), decodeAny(t, out); !reflect.DeepEqual(want, got) {
			t.Fatalf("round trip changed the value:\n in  %q\n out %q", data, out)
		}
	})
}

// FuzzUnquote: Unquote agrees with encoding/json on what is a JSON string
// and what it says, and never panics.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a"`, `""`, `"a\"b"`, `"\u00e9"`, `"abc`, `"ab"c"`, "\"a\nb\"", `"\xff"`, `1`, `"`,
		`"\ud83d\ude00"`, `"\ud83d"`, `"\udc00\ud83d\ude00"`, `"\ud83d\u0041"`, "\"\xff\xfe\"", `"\x"`, `"\u12"`, `"\/"`, `"é"`, `"\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := Unquote(raw)
		var want string
		// A raw value has no whitespace around it (encoding/json would
		// skip it), so only an exact string literal counts.
		stdOK := len(raw) > 1 && raw[0] == '"' && raw[len(raw)-1] == '"' && json.Unmarshal(raw, &want) == nil
		if ok != stdOK {
			t.Fatalf("Unquote(%q) ok = %v, encoding/json %v", raw, ok, stdOK)
		}
		if ok && got != want {
			t.Fatalf("Unquote(%q) = %q, encoding/json %q", raw, got, want)
		}
		// Keeping bytes as sent differs only where they are not UTF-8.
		if ok && utf8.Valid(raw) {
			if b, ok2 := AppendEscapesDecoded(nil, raw[1:len(raw)-1]); !ok2 || string(b) != want {
				t.Fatalf("AppendEscapesDecoded(%q) = %q, %v; want %q", raw, b, ok2, want)
			}
		}
	})
}

// FuzzFoldedKey checks the byte scanner against the keys encoding/json
// sees: on valid JSON, KeyFold.In is true exactly when a decoded key folds
// onto a name without being it.
func FuzzFoldedKey(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{"Choices":1}`, `{"a":"\\","Tool_calls":[]}`, `{"choice\u017f":1}`, `[{"x":{"ID":2}}]`, `{"a":"\"Choices\":"}`} {
		f.Add([]byte(s))
	}
	names := []string{"choices", "tool_calls", "id", "k"}
	set := NewKeyFold(names...)
	f.Fuzz(func(t *testing.T, data []byte) {
		got := set.In(data)
		if !json.Valid(data) {
			return
		}
		v := decodeAny(t, data)
		want := false
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for key, val := range v {
					for _, n := range names {
						if key != n && strings.EqualFold(key, n) {
							want = true
						}
					}
					walk(val)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			}
		}
		walk(v)
		if got != want {
			t.Fatalf("In(%q) = %v, decoded keys say %v", data, got, want)
		}
	})
}

// checkSplit: on values of a document ParseObject accepted, the unchecked
// splitters find exactly what the checking ones find.
func checkSplit(t *testing.T, obj Object) {
	t.Helper()
	for _, m := range obj {
		v := m.Value
		switch v[0] {
		case '{':
			want, err := ParseObject(v)
			got, err2 := SplitObjectInto(nil, v)
			if (err == nil) != (err2 == nil) || !reflect.DeepEqual(want, got) && len(want)+len(got) > 0 {
				t.Fatalf("SplitObjectInto(%q) = %q, %v; ParseObject = %q, %v", v, got, err2, want, err)
			}
			checkSplit(t, want)
		case '[':
			want, err := ParseArray(v)
			got, err2 := SplitArrayInto(nil, v)
			if (err == nil) != (err2 == nil) || !reflect.DeepEqual(want, got) && len(want)+len(got) > 0 {
				t.Fatalf("SplitArrayInto(%q) = %q, %v; ParseArray = %q, %v", v, got, err2, want, err)
			}
			for _, e := range want {
				if len(e) > 0 && e[0] == '{' {
					o, _ := ParseObject(e)
					checkSplit(t, o)
				}
			}
		}
	}
}

// FuzzSplit: the unchecked splitters never panic or read out of bounds,
// whatever the bytes.
func FuzzSplit(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if o, err := SplitObjectInto(nil, data); err == nil {
			for _, m := range o {
				if len(m.Value) == 0 {
					t.Fatalf("empty value for %q in %q", m.Key, data)
				}
			}
		}
		if a, err := SplitArrayInto(nil, data); err == nil {
			for _, e := range a {
				if len(e) == 0 {
					t.Fatalf("empty element in %q", data)
				}
			}
		}
	})
}

// FuzzDecode: Decode gives what encoding/json with UseNumber gives, and
// refuses what it refuses (Decode may also decline very deep input, which
// its callers hand to encoding/json).
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{"a":1.50,"b":[true,null,"x\u00e9"],"a":2}`, ` [1e3, -0, {"":{}}] `, `"\ud800"`, "{\"\xff\":1}", `{"a":1} {}`, `12`, `[[[[[[1]]]]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := Decode(data)
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var want any
		err := dec.Decode(&want)
		if err == nil {
			if _, terr := dec.Token(); terr != io.EOF {
				err = errors.New("trailing data")
			}
		}
		if ok && err != nil {
			t.Fatalf("Decode(%q) accepted what encoding/json refuses: %v", data, err)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) = %#v, encoding/json %#v", data, got, want)
		}
		if !ok && err == nil && bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) <= decodeDepth {
			t.Fatalf("Decode(%q) refused what encoding/json reads as %#v", data, want)
		}
	})
}
