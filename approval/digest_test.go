package approval

import (
	"encoding/json"
	"strings"
	"testing"
)

func mustDigest(t *testing.T, body string) string {
	t.Helper()
	d, err := RequestDigest([]byte(body))
	if err != nil {
		t.Fatalf("RequestDigest(%s): %v", body, err)
	}
	return d
}

// TestRequestDigestJSONEqual: key order, whitespace and the spelling of a
// string's escapes do not change the digest.
func TestRequestDigestJSONEqual(t *testing.T) {
	groups := [][]string{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1}`,
			"{ \"n\" : 1,\n\t\"messages\" : [ { \"content\" : \"hi\", \"role\" : \"user\" } ] , \"model\":\"m\" }"},
		{`{"s":"A/é"}`, `{"s":"\u0041\/\u00e9"}`},
		{`{"s":"\ud83d\ude00"}`, `{"s":"😀"}`},
		{`[]`, ` [ ] `},
	}
	for _, g := range groups {
		want := mustDigest(t, g[0])
		for _, b := range g[1:] {
			if got := mustDigest(t, b); got != want {
				t.Errorf("%s and %s digest differently", g[0], b)
			}
		}
	}
}

// TestRequestDigestValuesMatter: any change of a value, of array order or
// of a number's spelling is a different request.
func TestRequestDigestValuesMatter(t *testing.T) {
	base := `{"a":1,"b":[1,2],"c":"x","d":null,"e":true}`
	for _, other := range []string{
		`{"a":2,"b":[1,2],"c":"x","d":null,"e":true}`,
		`{"a":1,"b":[2,1],"c":"x","d":null,"e":true}`,
		`{"a":1.0,"b":[1,2],"c":"x","d":null,"e":true}`,
		`{"a":1,"b":[1,2],"c":"X","d":null,"e":true}`,
		`{"a":1,"b":[1,2],"c":"x","e":true}`,
		`{"a":1,"b":[1,2],"c":"x","d":false,"e":true}`,
		`{"a":"1","b":[1,2],"c":"x","d":null,"e":true}`,
		`{"a":1,"b":[1,2],"c":"x ","d":null,"e":true}`,
		`{"a":1,"b":[1,2,null],"c":"x","d":null,"e":true}`,
		`{"A":1,"b":[1,2],"c":"x","d":null,"e":true}`,
	} {
		if mustDigest(t, base) == mustDigest(t, other) {
			t.Errorf("%s and %s digest the same", base, other)
		}
	}
	// Integers beyond 2^53 stay apart: a float reading would merge them.
	if mustDigest(t, `{"id":9007199254740993}`) == mustDigest(t, `{"id":9007199254740992}`) {
		t.Error("large integers merged")
	}
}

func TestCanonicalForm(t *testing.T) {
	cases := map[string]string{
		`{"b":1,"a":{"d":[true,false,null],"c":-0.5e10}}`:                 `{"a":{"c":-0.5e10,"d":[true,false,null]},"b":1}`,
		`"tab\tnl\ncr\rbs\bff\fvt\u000bdel` + "\x7f" + `ls\u2028q\"bs\\"`: `"tab\tnl\ncr\rbs\bff\fvt\u000bdel` + "\x7f" + `ls` + "\u2028" + `q\"bs\\"`,
		// Names sort by UTF-16 code units (RFC 8785): U+1F600 is the
		// surrogate pair D83D DE00, which sorts before U+FF61.
		`{"｡":1,"😀":2,"a":3}`: `{"a":3,"😀":2,"｡":1}`,
		`{}`:                  `{}`,
	}
	for in, want := range cases {
		got, err := Canonical([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
}

// TestCanonicalRefusesAmbiguousBodies: bodies that parsers read
// differently get no digest at all.
func TestCanonicalRefusesAmbiguousBodies(t *testing.T) {
	for _, in := range []string{
		`{"a":1,"a":2}`,
		`{"a":{"b":1,"b":1}}`,
		"{\"a\":\"\xff\"}",
		`{"a":"\ud800"}`,
		`{"a":1} {"b":2}`,
		`{"a":1}x`,
		`{"a":}`,
		``,
		`{"a":01}`,
		`[1,]`,
	} {
		if got, err := Canonical([]byte(in)); err == nil {
			t.Errorf("Canonical(%q) = %s, want an error", in, got)
		}
	}
}

func TestCallDigest(t *testing.T) {
	d := func(name, args string) string {
		t.Helper()
		v, err := CallDigest(name, []byte(args))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v, "sha256:") || len(v) != len("sha256:")+64 {
			t.Fatalf("digest %q is not sha256:<hex>", v)
		}
		return v
	}
	if d("refund", `{"a":1,"b":2}`) != d("refund", ` {"b":2, "a":1}`) {
		t.Error("argument order changed the call digest")
	}
	if d("refund", ``) != d("refund", `null`) || d("refund", `{}`) != d("refund", ``) {
		t.Error("absent, null and {} arguments differ")
	}
	if d("refund", `{"a":1}`) == d("refund2", `{"a":1}`) || d("refund", `{"a":1}`) == d("refund", `{"a":2}`) {
		t.Error("a different name or value digests the same")
	}
	if _, err := CallDigest("refund", []byte(`{"a":1,"a":1}`)); err == nil {
		t.Error("duplicate argument names digested")
	}
	c, err := NewCall("refund", []byte(`{"b":[1, 2],"a":"x"}`))
	if err != nil || string(c.Arguments) != `{"a":"x","b":[1,2]}` || c.Digest != d("refund", `{"a":"x","b":[1,2]}`) {
		t.Fatalf("NewCall = %+v, %v", c, err)
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2,{"c":null}]}`, `"\u0041\n"`, `{"a":1,"a":2}`, `1e400`, `[`, `{"｡":1,"😀":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonical(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("canonical form of %q is not JSON: %q", in, out)
		}
		again, err := Canonical(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not a fixed point: %q -> %q -> %q (%v)", in, out, again, err)
		}
		if !json.Valid(in) {
			t.Fatalf("invalid JSON %q got a canonical form", in)
		}
	})
}
