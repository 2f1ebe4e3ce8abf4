package jsonx

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzAppendTape: AppendTape accepts exactly the JSON encoding/json
// accepts (bar nesting deeper than Decode reads), and its nodes hold the
// value encoding/json decodes, repeated names resolved as encoding/json
// does (the last wins).
func FuzzAppendTape(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{`"a"`, `1.5e3`, ` true `, `null`, `[[],{}]`, `{"a":{"b":[1,2,{"c":"\n"}]},"d":-0}`, `{"a" 1}`, `[1 2]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, ok := AppendTape(nil, data)
		valid := json.Valid(data)
		if ok && !valid {
			t.Fatalf("AppendTape accepts %q, which encoding/json refuses", data)
		}
		if !ok {
			if _, decoded := Decode(data); valid && decoded {
				t.Fatalf("AppendTape refuses %q, which encoding/json and Decode accept", data)
			}
			return
		}
		got, next := tapeValue(t, data, nodes, 0)
		if next != int32(len(nodes)) {
			t.Fatalf("%q: the root's Next is %d of %d nodes", data, next, len(nodes))
		}
		if want := decodeAny(t, data); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: tape holds %#v, encoding/json decodes %#v", data, got, want)
		}
	})
}

// tapeValue rebuilds the value of node i and returns the index after it.
func tapeValue(t *testing.T, data []byte, nodes []Node, i int32) (any, int32) {
	n := nodes[i]
	raw := data[n.Start:n.End]
	switch n.Kind {
	case '{':
		m := map[string]any{}
		j := i + 1
		for range n.Len {
			k, _ := tapeValue(t, data, nodes, j)
			var v any
			v, j = tapeValue(t, data, nodes, j+1)
			m[k.(string)] = v
		}
		checkNext(t, data, n, j)
		return m, j
	case '[':
		a := []any{}
		j := i + 1
		for range n.Len {
			var v any
			v, j = tapeValue(t, data, nodes, j)
			a = append(a, v)
		}
		checkNext(t, data, n, j)
		return a, j
	case '"':
		s, ok := AppendUnescaped(nil, raw)
		if !ok {
			t.Fatalf("%q: string %q does not decode", data, raw)
		}
		// An unescaped string of valid UTF-8 is its own text: the fast
		// path of schemas reads it without decoding.
		if !n.Escaped && utf8.Valid(raw) && string(s) != string(raw) {
			t.Fatalf("%q: string %q is not marked escaped but decodes to %q", data, raw, s)
		}
		return string(s), n.Next
	case '0':
		return json.Number(raw), n.Next
	case 't', 'f':
		return n.Kind == 't', n.Next
	}
	return nil, n.Next
}

func checkNext(t *testing.T, data []byte, n Node, j int32) {
	if n.Next != j {
		t.Fatalf("%q: a container's Next is %d, its last value ends at node %d", data, n.Next, j)
	}
}
