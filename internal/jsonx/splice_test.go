package jsonx

import "testing"

func TestSetMemberSplicesIntoTheBody(t *testing.T) {
	body := []byte("{\n  \"tools\": [ {\"name\": \"a\" } , {\"name\":\"b\",\"strict\":null}, {} ],\n  \"x\": 1\n}\n")
	top, err := SplitObject(body)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := SplitArray(top.Get("tools"))
	if err != nil {
		t.Fatal(err)
	}
	var edits []Edit
	for _, tool := range tools {
		e, err := SetMember(body, tool, "strict", []byte("true"))
		if err != nil {
			t.Fatal(err)
		}
		edits = append(edits, e)
	}
	got := string(Splice(body, edits))
	want := "{\n  \"tools\": [ {\"name\": \"a\" ,\"strict\":true} , {\"name\":\"b\",\"strict\":true}, {\"strict\":true} ],\n  \"x\": 1\n}\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if string(body) != "{\n  \"tools\": [ {\"name\": \"a\" } , {\"name\":\"b\",\"strict\":null}, {} ],\n  \"x\": 1\n}\n" {
		t.Errorf("Splice changed its input: %q", body)
	}
}

func TestOffsetRefusesForeignSlices(t *testing.T) {
	body := []byte(`{"a":{"b":1}}`)
	if _, err := Offset(body, []byte(`{"b":1}`)); err == nil {
		t.Error("a copy was taken for a slice of the body")
	}
	if _, err := SetMember(body, []byte(`{"b":1}`), "c", []byte("2")); err == nil {
		t.Error("SetMember edited a value that is not in the body")
	}
	top, _ := SplitObject(body)
	if off, err := Offset(body, top.Get("a")); err != nil || off != 5 {
		t.Errorf("offset %d, %v; want 5", off, err)
	}
}
