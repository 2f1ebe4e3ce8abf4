package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseObjectKeepsValueBytes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		keys []string
		vals []string
	}{
		{"empty", `{}`, nil, nil},
		{"empty with space", " { \n } ", nil, nil},
		{"scalars", `{"s":"x","n":-1.5e+3,"t":true,"f":false,"z":null}`,
			[]string{"s", "n", "t", "f", "z"}, []string{`"x"`, `-1.5e+3`, `true`, `false`, `null`}},
		{"whitespace inside values is kept", "{\"o\" : { \"a\" : [ 1 , 2 ] } ,\n\t\"b\":\"c\" }",
			[]string{"o", "b"}, []string{`{ "a" : [ 1 , 2 ] }`, `"c"`}},
		{"escapes in values are kept", `{"s":"a\"b\\c\u00e9\/"}`, []string{"s"}, []string{`"a\"b\\c\u00e9\/"`}},
		{"braces inside strings", `{"s":"}{][,:"}`, []string{"s"}, []string{`"}{][,:"`}},
		{"unknown future fields", `{"id":"x","future":{"deep":[{"x":[]}]},"n":0}`,
			[]string{"id", "future", "n"}, []string{`"x"`, `{"deep":[{"x":[]}]}`, `0`}},
		{"escaped keys are decoded", `{"a\"b":1,"\u00e9":2,"x\/y":3}`, []string{`a"b`, "é", "x/y"}, []string{"1", "2", "3"}},
		{"non-ASCII key", `{"ключ":"значение"}`, []string{"ключ"}, []string{`"значение"`}},
		{"duplicate keys are all kept", `{"a":1,"a":2}`, []string{"a", "a"}, []string{"1", "2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := ParseObject([]byte(tc.in))
			if err != nil {
				t.Fatalf("ParseObject: %v", err)
			}
			if len(obj) != len(tc.keys) {
				t.Fatalf("%d members, want %d", len(obj), len(tc.keys))
			}
			for i, f := range obj {
				if f.Key != tc.keys[i] || string(f.Value) != tc.vals[i] {
					t.Errorf("member %d = %q: %s, want %q: %s", i, f.Key, f.Value, tc.keys[i], tc.vals[i])
				}
			}
			out := obj.Bytes()
			if !json.Valid(out) {
				t.Fatalf("Bytes() = %s is not valid JSON", out)
			}
			var a, b any
			if err := json.Unmarshal([]byte(tc.in), &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("round trip changed the value: %s -> %s", tc.in, out)
			}
		})
	}
}

// TestCompactObjectRoundTripIsIdentical: a compact object with plain keys
// comes back byte for byte, which is what lets an untouched answer be
// forwarded unchanged after a splice elsewhere.
func TestCompactObjectRoundTripIsIdentical(t *testing.T) {
	for _, in := range []string{
		`{}`,
		`{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":null}}],"usage":{"prompt_tokens":1}}`,
		`{"a":"<&>","b":"\u2028","c":1e400,"d":-0,"e":"\ud83d\ude00"}`,
		`{"k":"v","nested":{"x":[1,{"y":"z"}]}}`,
	} {
		t.Run(in, func(t *testing.T) {
			obj, err := ParseObject([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(obj.Bytes()); got != in {
				t.Errorf("Bytes() = %s, want %s", got, in)
			}
		})
	}
}

func TestParseArray(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", `[]`, nil},
		{"empty with space", ` [ ] `, nil},
		{"mixed", `[1,"a",{"b":[2]},[],null,true]`, []string{"1", `"a"`, `{"b":[2]}`, `[]`, "null", "true"}},
		{"whitespace", "[ 1 ,\n \"x\" ]", []string{"1", `"x"`}},
		{"nested", `[[[]],[{}]]`, []string{`[[]]`, `[{}]`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseArray([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d elements, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if string(got[i]) != tc.want[i] {
					t.Errorf("element %d = %s, want %s", i, got[i], tc.want[i])
				}
			}
			if compact := strings.Join(tc.want, ","); string(AppendArray(nil, got)) != "["+compact+"]" {
				t.Errorf("AppendArray = %s", AppendArray(nil, got))
			}
		})
	}
}

func TestParseRejectsMalformed(t *testing.T) {
	objects := []string{
		``, ` `, `null`, `[]`, `"s"`, `1`,
		`{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,`, `{"a":"x`, `{"a":"x\`, `{"a":"x\"}`,
		`{"a":1,}`, `{,}`, `{,"a":1}`, `{"a" 1}`, `{"a":1 "b":2}`, `{a:1}`, `{'a':1}`, `{"a"::1}`, `{"a":}`,
		`{} x`, `{}{}`, `{},`, `{"a":1}}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`, `{"a":{"b"}}`,
		`{"a":tru}`, `{"a":nul}`, `{"a":True}`, `{"a":NaN}`, `{"a":undefined}`, `{"a":x}`,
		`{"a\q":1}`, `{"a":[}`, `{"a":{]}`,
	}
	for _, in := range objects {
		t.Run("object "+in, func(t *testing.T) {
			if obj, err := ParseObject([]byte(in)); !errors.Is(err, ErrSyntax) {
				t.Errorf("ParseObject(%q) = %v, %v; want ErrSyntax", in, obj, err)
			}
		})
	}
	arrays := []string{``, `{}`, `[`, `[1`, `[1,`, `[1,]`, `[,]`, `[,1]`, `[1 2]`, `[] x`, `[][]`, `[tru]`, `["a]`, `[}`}
	for _, in := range arrays {
		t.Run("array "+in, func(t *testing.T) {
			if got, err := ParseArray([]byte(in)); !errors.Is(err, ErrSyntax) {
				t.Errorf("ParseArray(%q) = %q, %v; want ErrSyntax", in, got, err)
			}
		})
	}
}

func TestDepthBound(t *testing.T) {
	tests := []struct {
		name  string
		depth int
		ok    bool
	}{
		{"shallow", 10, true},
		{"deep but allowed", 9000, true},
		{"over the bound", 10002, false},
		{"far over the bound", 200000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			arr := `{"a":` + strings.Repeat("[", tc.depth) + strings.Repeat("]", tc.depth) + `}`
			obj := `{"a":` + strings.Repeat(`{"b":`, tc.depth) + "1" + strings.Repeat("}", tc.depth) + `}`
			for _, in := range []string{arr, obj} {
				_, err := ParseObject([]byte(in))
				if (err == nil) != tc.ok {
					t.Errorf("depth %d: err = %v", tc.depth, err)
				}
			}
			_, err := ParseArray([]byte(strings.Repeat("[", tc.depth+1) + strings.Repeat("]", tc.depth+1)))
			if (err == nil) != tc.ok {
				t.Errorf("array depth %d: err = %v", tc.depth, err)
			}
		})
	}
	t.Run("unclosed deep input fails fast", func(t *testing.T) {
		if _, err := ParseObject([]byte(`{"a":` + strings.Repeat("[", 5000))); err == nil {
			t.Error("accepted")
		}
	})
}

func TestObjectEdit(t *testing.T) {
	const in = `{"id":"x","choices":[1],"usage":{"n":1}}`
	tests := []struct {
		name string
		edit func(Object) Object
		want string
	}{
		{"set existing keeps position", func(o Object) Object { return o.Set("choices", []byte(`[2,3]`)) }, `{"id":"x","choices":[2,3],"usage":{"n":1}}`},
		{"set new appends", func(o Object) Object { return o.Set("toolgate_escalation", []byte(`{"id":"esc_1"}`)) }, `{"id":"x","choices":[1],"usage":{"n":1},"toolgate_escalation":{"id":"esc_1"}}`},
		{"delete middle", func(o Object) Object { return o.Delete("choices") }, `{"id":"x","usage":{"n":1}}`},
		{"delete first", func(o Object) Object { return o.Delete("id") }, `{"choices":[1],"usage":{"n":1}}`},
		{"delete last", func(o Object) Object { return o.Delete("usage") }, `{"id":"x","choices":[1]}`},
		{"delete missing", func(o Object) Object { return o.Delete("nope") }, in},
		{"delete then set", func(o Object) Object { return o.Delete("id").Set("id", []byte(`"y"`)) }, `{"choices":[1],"usage":{"n":1},"id":"y"}`},
		{"key needing escapes", func(o Object) Object { return o.Set("a\"b<\n", []byte(`1`)) }, `{"id":"x","choices":[1],"usage":{"n":1},"a\"b<\n":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := ParseObject([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(tc.edit(obj).Bytes()); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	t.Run("delete leaves the parsed object intact", func(t *testing.T) {
		obj, _ := ParseObject([]byte(in))
		_ = obj.Delete("id")
		if got := string(obj.Bytes()); got != in {
			t.Errorf("original became %s", got)
		}
	})
	t.Run("get and has", func(t *testing.T) {
		obj, _ := ParseObject([]byte(in))
		if string(obj.Get("usage")) != `{"n":1}` || !obj.Has("id") || obj.Has("nope") || obj.Get("nope") != nil {
			t.Error("Get/Has disagree with the document")
		}
	})
}

// TestDuplicateKeysFollowDecoders: encoding/json (and every mainstream
// decoder) lets the last of repeated keys win. An edit that read or
// replaced the first one would change a value no client ever sees and
// leave the one they do see untouched.
func TestDuplicateKeysFollowDecoders(t *testing.T) {
	const in = `{"choices":[1],"x":0,"choices":[2]}`
	obj, err := ParseObject([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var std struct {
		Choices json.RawMessage `json:"choices"`
	}
	if err := json.Unmarshal([]byte(in), &std); err != nil {
		t.Fatal(err)
	}
	if got := obj.Get("choices"); !bytes.Equal(got, std.Choices) {
		t.Errorf("Get = %s, encoding/json reads %s", got, std.Choices)
	}
	out := obj.Set("choices", []byte(`[9]`)).Bytes()
	if err := json.Unmarshal(out, &std); err != nil {
		t.Fatal(err)
	}
	if string(std.Choices) != `[9]` {
		t.Errorf("after Set a decoder reads %s from %s", std.Choices, out)
	}
	obj, _ = ParseObject([]byte(in))
	if del := obj.Delete("choices"); del.Has("choices") {
		t.Errorf("Delete left a copy: %s", del.Bytes())
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"plain", `"plain"`},
		{"<a&b>", `"<a&b>"`},
		{"q\"b\\s/", `"q\"b\\s/"`},
		{"\n\t\x00", `"\n\t\u0000"`},
		{"é😀", `"é😀"`},
		{"\u2028", `"\u2028"`},
		{"\xff", `"\ufffd"`},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			got := String(tc.in)
			if string(got) != tc.want {
				t.Errorf("String(%q) = %s, want %s", tc.in, got, tc.want)
			}
			if s, ok := Unquote(got); !ok || (s != tc.in && tc.in != "\xff") {
				t.Errorf("Unquote(%s) = %q, %v", got, s, ok)
			}
		})
	}
}

func TestUnquote(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{`"abc"`, "abc", true},
		{`""`, "", true},
		{`"a\"b"`, `a"b`, true},
		{`"\u00e9"`, "é", true},
		{`"{\"city\":\"Paris\"}"`, `{"city":"Paris"}`, true},
		{`{"a":1}`, "", false},
		{`null`, "", false},
		{`12`, "", false},
		{``, "", false},
		{`"`, "", false},
		{`"abc`, "", false},
		{`"ab"c"`, "", false},
		{`"a\"`, "", false},
		{`"a\qb"`, "", false},
		{"\"a\nb\"", "", false},
		{`"abc" `, "", false},
		{` "abc"`, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := Unquote([]byte(tc.in))
			if got != tc.want || ok != tc.ok {
				t.Errorf("Unquote(%s) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
			var std string
			stdOK := json.Unmarshal([]byte(tc.in), &std) == nil && strings.HasPrefix(tc.in, `"`) && strings.HasSuffix(tc.in, `"`)
			if stdOK != ok || (ok && std != got) {
				t.Errorf("encoding/json says %q, %v", std, stdOK)
			}
		})
	}
}

func TestIsNull(t *testing.T) {
	tests := []struct {
		in   []byte
		want bool
	}{
		{nil, true}, {[]byte{}, true}, {[]byte("null"), true},
		{[]byte(`"null"`), false}, {[]byte("0"), false}, {[]byte("{}"), false}, {[]byte("nul"), false},
	}
	for _, tc := range tests {
		t.Run(string(tc.in), func(t *testing.T) {
			if got := IsNull(tc.in); got != tc.want {
				t.Errorf("IsNull(%q) = %v", tc.in, got)
			}
		})
	}
}

func TestMarshalDoesNotEscapeHTML(t *testing.T) {
	got, err := Marshal(map[string]string{"a": "<b>&"})
	if err != nil || string(got) != `{"a":"<b>&"}` {
		t.Errorf("Marshal = %s, %v", got, err)
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Error("Marshal of a func succeeded")
	}
}

// TestNestedSplice edits a value three levels down, as Render does with a
// repaired tool call, and checks every other byte is the upstream's.
func TestNestedSplice(t *testing.T) {
	const in = `{"id":"c1","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"bad","arguments":"{}"}},{"id":"b","function":{"name":"ok","arguments":"{ }"}}]},"logprobs":null}],"x":{"y":1}}`
	root, err := ParseObject([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	choices, err := ParseArray(root.Get("choices"))
	if err != nil {
		t.Fatal(err)
	}
	choice, err := ParseObject(choices[0])
	if err != nil {
		t.Fatal(err)
	}
	msg, err := ParseObject(choice.Get("message"))
	if err != nil {
		t.Fatal(err)
	}
	calls, err := ParseArray(msg.Get("tool_calls"))
	if err != nil {
		t.Fatal(err)
	}
	calls = append([][]byte(nil), calls...)
	call, err := ParseObject(calls[0])
	if err != nil {
		t.Fatal(err)
	}
	fn, err := ParseObject(call.Get("function"))
	if err != nil {
		t.Fatal(err)
	}
	fn = fn.Set("name", String("good")).Set("arguments", String(`{"q":"x"}`))
	calls[0] = call.Set("function", fn.Bytes()).Bytes()
	msg = msg.Set("tool_calls", AppendArray(nil, calls))
	choices = append([][]byte(nil), choices...)
	choices[0] = choice.Set("message", msg.Bytes()).Bytes()
	got := string(root.Set("choices", AppendArray(nil, choices)).Bytes())
	want := strings.Replace(in, `"name":"bad","arguments":"{}"`, `"name":"good","arguments":"{\"q\":\"x\"}"`, 1)
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !strings.Contains(in, `"name":"bad"`) {
		t.Error("the input was modified in place")
	}
}

func TestFoldedKey(t *testing.T) {
	cases := []struct {
		doc  string
		want bool
	}{
		{`{"choices":[{"message":{"tool_calls":[]}}]}`, false},
		{`{"Choices":[]}`, true},
		{`{"choices":[{"message":{"Tool_Calls":[]}}]}`, true},
		{`{"choices":[{"message":{"content":"\"Tool_calls\": is only text"}}]}`, false},
		{`{"Ch\u006fices":[]}`, true},
		{`{"other":{"CHOICES":1}}`, true},
		{`{"choicesx":1}`, false},
		{`not json`, false},
		{`{"choice\u017f":1}`, true},
		{"{\"choice\u017f\":1}", true},
		{`{"a":"x\\","Choices":1}`, true},
		{`{"a":"x\"Choices\":1"}`, false},
		{`{"a":"\\\"","b":{"Tool_calls":1}}`, true},
		{`{"CHOICES"   :  1}`, true},
		{`{"ÇHOICES":1}`, false},
		{`{"choices":1,"unterminated`, false},
	}
	for _, c := range cases {
		t.Run(c.doc, func(t *testing.T) {
			if got := NewKeyFold("choices", "tool_calls").In([]byte(c.doc)); got != c.want {
				t.Errorf("In = %v, want %v", got, c.want)
			}
		})
	}
}

func TestInt(t *testing.T) {
	cases := []struct {
		raw  string
		want int64
		ok   bool
	}{
		{"", 0, true}, {"null", 0, true}, {"0", 0, true}, {"42", 42, true}, {"-7", -7, true},
		{"1.5", 0, false}, {"1e3", 0, false}, {`"3"`, 0, false}, {"true", 0, false},
		{"+3", 0, false}, {"99999999999999999999", 0, false}, {"{}", 0, false},
	}
	for _, c := range cases {
		got, ok := Int([]byte(c.raw))
		if got != c.want || ok != c.ok {
			t.Errorf("Int(%q) = %d, %v; want %d, %v", c.raw, got, ok, c.want, c.ok)
		}
		// encoding/json into an int64 is the reference for a present value.
		if c.raw != "" {
			var v int64
			if err := json.Unmarshal([]byte(c.raw), &v); (err == nil) != c.ok {
				t.Errorf("Int(%q) ok=%v but encoding/json says %v", c.raw, ok, err)
			}
		}
	}
}

func TestEmbeddableAndCompactObject(t *testing.T) {
	if got := string(Embeddable([]byte(`{ "a" : [1, 2] }`))); got != `{"a":[1,2]}` {
		t.Errorf("JSON arguments: %s", got)
	}
	if got := string(Embeddable([]byte(`{"a":`))); got != `"{\"a\":"` {
		t.Errorf("broken arguments are kept as a string: %s", got)
	}
	if got, err := CompactObject([]byte(" {\n\"a\": 1}")); err != nil || string(got) != `{"a":1}` {
		t.Errorf("object: %s %v", got, err)
	}
	for _, in := range []string{`[1]`, `"x"`, ``, `{"a":`} {
		if _, err := CompactObject([]byte(in)); err == nil {
			t.Errorf("%q was taken as an object", in)
		}
	}
	if _, err := CompactObject([]byte(`[]`)); !errors.Is(err, ErrNotObject) {
		t.Errorf("an array: %v", err)
	}
}

func TestKeyFoldFolds(t *testing.T) {
	k := NewKeyFold("functionCall", "args")
	for key, want := range map[string]bool{"functionCall": false, "FunctionCall": true, "ARGS": true, "argz": false, "Type": false, "\u212aey": false} {
		if got := k.Folds(key); got != want {
			t.Errorf("Folds(%q) = %v", key, got)
		}
	}
}

func TestAppendToField(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
		err              bool
	}{
		{"appends last, keeps the rest", `{"a":1,"tools":[{"x":1}],"z":[2]}`, `{"a":1,"tools":[{"x":1},{"n":0}],"z":[2]}`, false},
		{"empty array", `{"tools":[]}`, `{"tools":[{"n":0}]}`, false},
		{"absent field", `{"a":1}`, "", true},
		{"not an array", `{"tools":{"x":1}}`, "", true},
		{"not an object", `[1]`, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendToField([]byte(tc.body), "tools", []byte(`{"n":0}`))
			if (err != nil) != tc.err || string(got) != tc.want {
				t.Fatalf("got %s, %v; want %s (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestReadingFollowsEncodingJSON: invalid UTF-8 and lone surrogate escapes,
// which encoding/json accepts in a string, ParseObject accepts too and
// keeps as sent, and Decode reads them as encoding/json does (U+FFFD).
// Refusing such text is the caller's decision, taken before reading (the
// pipeline refuses such an answer, the validator such arguments).
func TestReadingFollowsEncodingJSON(t *testing.T) {
	for _, in := range []string{"{\"k\":\"v\xfe\"}", "{\"k\xff\":1}", `{"k":"\ud800"}`, `{"k":"\udc00\ud83d\ude00x"}`} {
		t.Run(in, func(t *testing.T) {
			obj, err := ParseObject([]byte(in))
			if err != nil || len(obj) != 1 {
				t.Fatalf("ParseObject = %q, %v", obj, err)
			}
			if want := in[strings.LastIndexByte(in, ':')+1 : len(in)-1]; string(obj[0].Value) != want {
				t.Errorf("value %s, sent %s", obj[0].Value, want)
			}
			dec := json.NewDecoder(strings.NewReader(in))
			dec.UseNumber()
			var want any
			if err := dec.Decode(&want); err != nil {
				t.Fatal(err)
			}
			if got, ok := Decode([]byte(in)); !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("Decode = %#v, %v; encoding/json %#v", got, ok, want)
			}
		})
	}
}

// TestSyntaxErrorSaysWhereNotWhat: a syntax error tells where the reading
// stopped but quotes nothing of the document, whose keys and text can be
// secrets and reach the logs.
func TestSyntaxErrorSaysWhereNotWhat(t *testing.T) {
	const secret = "sk-live-0123"
	for _, tc := range []struct {
		in, want string
	}{
		{`{"` + secret + `":tru}`, "at byte 19"},
		{`{"a":"` + secret + `" "b":1}`, "at byte 20"},
		{`{"` + secret + `":1} {}`, "a second value"},
		{`["` + secret + `"]`, "[ where { was expected"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseObject([]byte(tc.in))
			if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), secret) {
				t.Errorf("error %v, want ErrSyntax saying %q and not the document", err, tc.want)
			}
		})
	}
}

func TestSameText(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{`{"a":1}`, `{ "a" : 1 }`, true},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, false},
		{`{"a":"\u00e9"}`, `{"a":"é"}`, false},
		{`{"a":`, `{"a":`, true},
		{`{"a":`, `{"a": `, false},
	} {
		if got := SameText([]byte(c.a), []byte(c.b)); got != c.want {
			t.Errorf("SameText(%s, %s) = %v", c.a, c.b, got)
		}
	}
}
