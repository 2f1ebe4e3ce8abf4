package jsonx

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fixtureStreams are the shared recordings' streams, each the data of its
// events in order.
func fixtureStreams(t testing.TB) map[string][][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "fixtures", "*.sse"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded streams: %v", err)
	}
	streams := map[string][][]byte{}
	for _, p := range append(paths, filepath.Join("testdata", "answer.sse")) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
				streams[filepath.Base(p)] = append(streams[filepath.Base(p)], []byte(d))
			}
		}
	}
	return streams
}

// followPairs seed FuzzFollow with one string's content changed in every
// way that matters: longer, shorter, emptied, escaped, closed early, cut
// by a control character, not UTF-8, a key rather than a value.
var followPairs = [][2]string{
	{`{"a":"x","b":[1,"y"]}`, `{"a":"xyz","b":[1,"y"]}`},
	{`{"a":"xyz","b":[1,"y"]}`, `{"a":"","b":[1,"y"]}`},
	{`{"a":"x","b":[1,"y"]}`, `{"a":"x","b":[1,"y\"z"]}`},
	{`{"a":"x","b":[1,"y"]}`, `{"a":"x","b":[1,"y"z"]}`},
	{`{"a":"x","b":[1,"y"]}`, `{"a":"x\u00e9","b":[1,"y"]}`},
	{`{"a":"x","b":[1,"y"]}`, "{\"a\":\"x\x01\",\"b\":[1,\"y\"]}"},
	{`{"a":"x","b":[1,"y"]}`, "{\"a\":\"x\xff\",\"b\":[1,\"y\"]}"},
	{`{"a":"x","b":[1,"y"]}`, `{"A":"x","b":[1,"y"]}`},
	{`{"a":"x","b":[1,"y"]}`, `{"a":"x","b":[1,"y"]}`},
	{`{"a":"x\\","b":1}`, `{"a":"x\\\\","b":1}`},
	{`{"a":"x\\","b":1}`, `{"a":"x\\"","b":1}`},
	{`{"a":"x","b":"y"}`, `{"a":"x","b":"y"}  `},
	{`["a"]`, `[1,"a"]`},
	{`"ab"`, `"aab"`},
	{`{"k":"v"}`, `{"k":"v","type":"t"}`},
}

// FuzzFollow holds Follow to Read: reading b after a leaves the same tape,
// verdict and UTF-8 finding as reading b alone, and where Follow says the
// keys are a's, they are, byte for byte.
func FuzzFollow(f *testing.F) {
	for _, p := range followPairs {
		f.Add([]byte(p[0]), []byte(p[1]))
	}
	for _, events := range fixtureStreams(f) {
		for i := 1; i < len(events); i++ {
			f.Add(events[i-1], events[i])
		}
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		checkFollow(t, a, b)
	})
}

func checkFollow(t *testing.T, a, b []byte) (short bool) {
	t.Helper()
	prev, got, want := new(Text), new(Text), new(Text)
	prev.Read(a)
	ok, sameKeys := got.Follow(prev, b)
	wantOK := want.Read(b)
	if ok != wantOK || got.valid != want.valid {
		t.Fatalf("after %q, Follow(%q) = %v, Read = %v", a, b, ok, wantOK)
	}
	if !ok {
		return false
	}
	if got.NotUTF8 != want.NotUTF8 || !reflect.DeepEqual(got.Nodes, want.Nodes) || string(got.Data) != string(b) {
		t.Fatalf("after %q, Follow(%q):\n%v NotUTF8 %v\nRead:\n%v NotUTF8 %v", a, b, got.Nodes, got.NotUTF8, want.Nodes, want.NotUTF8)
	}
	if sameKeys && !reflect.DeepEqual(keysOf(prev), keysOf(want)) {
		t.Fatalf("Follow says %q has the keys of %q: %q against %q", b, a, keysOf(want), keysOf(prev))
	}
	if changed, followed := got.Changed(); followed {
		checkChanged(t, prev, got, changed)
	}
	return sameKeys
}

// checkChanged: where Follow says only string node changed differs, every
// other node has prev's kind, length and place in the tape, and every
// other value prev's bytes.
func checkChanged(t *testing.T, prev, got *Text, changed int) {
	t.Helper()
	if len(prev.Nodes) != len(got.Nodes) {
		t.Fatalf("followed %q from %q: %d nodes, prev %d", got.Data, prev.Data, len(got.Nodes), len(prev.Nodes))
	}
	for i := range got.Nodes {
		p, g := prev.Nodes[i], got.Nodes[i]
		if p.Kind != g.Kind || p.Len != g.Len || p.Next != g.Next {
			t.Fatalf("followed %q from %q: node %d is %+v, was %+v", got.Data, prev.Data, i, g, p)
		}
		if i == changed {
			if g.Kind != '"' {
				t.Fatalf("changed node %d is a %c", i, g.Kind)
			}
			continue
		}
		if g.Kind != '{' && g.Kind != '[' && string(got.Raw(i)) != string(prev.Raw(i)) {
			t.Fatalf("followed %q from %q: node %d is %q, was %q, and changed is %d", got.Data, prev.Data, i, got.Raw(i), prev.Raw(i), changed)
		}
	}
}

// keysOf lists every object key of a read text as written, in order.
func keysOf(tx *Text) []string {
	var keys []string
	for i := range tx.Nodes {
		n := &tx.Nodes[i]
		if n.Kind != '{' {
			continue
		}
		for j, k := i+1, 0; k < int(n.Len); k, j = k+1, tx.Next(j+1) {
			keys = append(keys, string(tx.Raw(j)))
		}
	}
	return keys
}

// TestFollowStreams: every recorded stream read event after event gives
// Read's tapes, and the Chat and Messages streams, whose events differ in
// one string, take the short way for most of them.
func TestFollowStreams(t *testing.T) {
	for name, events := range fixtureStreams(t) {
		short := 0
		for i := 1; i < len(events); i++ {
			if checkFollow(t, events[i-1], events[i]) {
				short++
			}
		}
		t.Logf("%s: %d of %d events read the short way", name, short, len(events)-1)
		if (strings.HasPrefix(name, "openai-chat") || name == "answer.sse") && short*2 < len(events)-1 {
			t.Errorf("%s: %d of %d events read the short way", name, short, len(events)-1)
		}
	}
}

// TestFollowPairs pins which pairs take the short way: a changed value
// does and keeps its keys; a changed key, a string closed early and a
// change outside strings read b whole.
func TestFollowPairs(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		short bool
	}{
		{`{"a":"x","b":[1,"y"]}`, `{"a":"xyz","b":[1,"y"]}`, true},
		{`{"a":"x","b":[1,"y"]}`, `{"a":"x","b":[1,"y\"z"]}`, true},
		{`{"a":"x","b":[1,"y"]}`, `{"a":"x","b":[1,"y"]}`, true},
		{`{"a":"x","b":[1,"y"]}`, "{\"a\":\"x\xff\",\"b\":[1,\"y\"]}", true},
		{`{"a":"x","b":[1,"y"]}`, `{"A":"x","b":[1,"y"]}`, false},
		{`{"a":"x","b":[1,"y"]}`, `{"a":"x","b":[1,"y"z"]}`, false},
		{`{"a":"x","b":[1,"y"]}`, `{"a":"x","b":[2,"y"]}`, false},
		{`{"a":"x\\","b":1}`, `{"a":"x\\"","b":1}`, false},
		{`["a"]`, `[1,"a"]`, false},
		{`"ab"`, `"aab"`, true},
	} {
		if got := checkFollow(t, []byte(c.a), []byte(c.b)); got != c.short {
			t.Errorf("%s then %s: short way %v, want %v", c.a, c.b, got, c.short)
		}
	}
}

// TestFollowKeep: a kept text outlives the buffer it was read from.
func TestFollowKeep(t *testing.T) {
	buf := []byte(`{"a":"one"}`)
	tx, kept := new(Text), new(Text)
	if !tx.Read(buf) {
		t.Fatal("refused")
	}
	kept.Keep(tx)
	copy(buf, `{"b":"two"}`)
	next, got := []byte(`{"a":"three"}`), new(Text)
	if ok, same := got.Follow(kept, next); !ok || !same {
		t.Fatalf("Follow after Keep = %v, %v", ok, same)
	}
	if s, _ := got.Str(got.Get(0, "a")); s != "three" {
		t.Fatalf("a = %q", s)
	}
	if ok, same := got.Follow(new(Text), next); !ok || same {
		t.Fatalf("Follow after nothing kept = %v, %v", ok, same)
	}
}
