package storespec

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := map[string]Spec{
		"":                         {Kind: Memory},
		"memory":                   {Kind: Memory},
		"file:/var/lib/a.db":       {Kind: File, Path: "/var/lib/a.db"},
		"file:rel/a.db":            {Kind: File, Path: "rel/a.db"},
		"redis://127.0.0.1:6390/3": {Kind: Redis, Addr: "127.0.0.1:6390", DB: 3},
		"redis://cache":            {Kind: Redis, Addr: "cache:6379"},
		"redis://cache/":           {Kind: Redis, Addr: "cache:6379"},
		"redis://[::1]:7000/0":     {Kind: Redis, Addr: "[::1]:7000"},
	}
	for in, want := range good {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"Memory":                     "not one of",
		"file:":                      "needs a path",
		"file:   ":                   "needs a path",
		"redis://user:pw@host:1/0":   "credentials",
		"redis://host:1/0?x=1":       "query",
		"redis://host:1/0#f":         "fragment",
		"redis://:6379/0":            "no host",
		"redis://host:/0":            "empty port",
		"redis://host:0/0":           "invalid port",
		"redis://host:70000/0":       "invalid port",
		"redis://host:1/x":           "database number",
		"redis://host:1/-1":          "database number",
		"redis://host:1/01":          "database number",
		"redis://host:1/0/1":         "database number",
		"rediss://host:1/0":          "not one of",
		"postgres://host/db":         "not one of",
		"redis://host:1/99999999999": "database number",
	}
	for in, want := range bad {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}

func TestStringRoundTrips(t *testing.T) {
	for _, in := range []string{"memory", "file:/a/b.db", "redis://10.0.0.1:6380/2"} {
		s, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if s.String() != in {
			t.Errorf("%q came back as %q", in, s.String())
		}
	}
}
