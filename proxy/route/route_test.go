package route

import (
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/proxy/openaiwire"
)

func TestCanonicalPath(t *testing.T) {
	cases := []struct{ in, want string }{
		{"/v1/chat/completions", "/v1/chat/completions"},
		{"/", "/"},
		{"", ""},
		{"/v1/chat/completion%73", "/v1/chat/completions"},
		{"/v1/%6Dessages", "/v1/messages"},
		{"/v1/%6dessages", "/v1/messages"},
		{"/%7Euser/%2D%2E%5F", "/~user/-._"},
		{"/v1/chat%2Fcompletions", "/v1/chat%2Fcompletions"},
		{"/v1/chat%2fcompletions", "/v1/chat%2Fcompletions"},
		{"/v1/a%3ab", "/v1/a%3Ab"},
		{"/v1/%2e%2e/x", "/v1/../x"},
		{"/v1/chat/completions%20", "/v1/chat/completions%20"},
		{"/v1/a%00b", "/v1/a%00b"},
		{"/v1/a%252Fb", "/v1/a%252Fb"},
		{"/v1/a%zzb", "/v1/a%25zzb"},
		{"/v1/a%", "/v1/a%25"},
		{"/v1/a%4", "/v1/a%254"},
		{"/v1/{x}", "/v1/%7Bx%7D"},
		{"/v1/café", "/v1/caf%C3%A9"},
		{"/v1/a b", "/v1/a%20b"},
		{"/v1\\chat", "/v1%5Cchat"},
		{"/v1/;x=1/:@!$&'()*+,=", "/v1/;x=1/:@!$&'()*+,="},
		{"/v1/chat/completions#x", "/v1/chat/completions%23x"},
	}
	for _, c := range cases {
		if got := CanonicalPath(c.in); got != c.want {
			t.Errorf("CanonicalPath(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := CanonicalPath(c.want); again != c.want {
			t.Errorf("CanonicalPath is not idempotent on %q: %q", c.want, again)
		}
	}
}

func TestLooseForm(t *testing.T) {
	cases := []struct {
		in    string
		want  string
		flags int
		above bool
	}{
		{"/v1/chat/completions", "/v1/chat/completions", 0, false},
		{"/V1/Chat/Completions", "/V1/Chat/Completions", 0, false},
		{"//v1/chat/completions", "/v1/chat/completions", looseSlashes, false},
		{"/v1/chat/completions/", "/v1/chat/completions", looseTrailing, false},
		{"/v1/./chat/../chat/completions", "/v1/chat/completions", looseDot, false},
		{"/v1/chat%2Fcompletions", "/v1/chat/completions", looseSeparator, false},
		{"/v1/chat%5Ccompletions", "/v1/chat/completions", looseSeparator, false},
		{"/v1%5Cchat%5Ccompletions", "/v1/chat/completions", looseSeparator, false},
		{"/v1/chat/completions;x=1", "/v1/chat/completions", looseParameter, false},
		{"/v1/chat/completions%20", "/v1/chat/completions", looseSpace | looseEncoding, false},
		{"/v1/chat/compl%09etions", "/v1/chat/completions", looseSpace | looseEncoding, false},
		{"/v1/chat/completions%3Fx", "/v1/chat/completions", looseSeparator, false},
		{"/v1/chat/completions%23x", "/v1/chat/completions", looseSeparator, false},
		{"/v1/chat%252Fcompletions", "/v1/chat/completions", looseEncoding, false},
		{"/v1/chat%C0%AFcompletions", "/v1/chat/completions", looseEncoding, false},
		{"/v1/chat%EF%BC%8Fcompletions", "/v1/chat/completions", looseEncoding, false},
		{"/v1/chat/completions.", "/v1/chat/completions", looseDot, false},
		{"/../v1/messages", "/v1/messages", looseDot, true},
		{"/v1/files/report.v2.json", "/v1/files/report.v2.json", 0, false},
		{"/v1beta/models/gemini-1.5-pro:generateContent", "/v1beta/models/gemini-1.5-pro:generateContent", 0, false},
	}
	for _, c := range cases {
		fs := loosen(CanonicalPath(c.in))
		f := fs.f[0]
		if f.path != c.want || f.flags != c.flags || f.above != c.above {
			t.Errorf("loosen(%q) = %q flags %b above %v, want %q flags %b above %v", c.in, f.path, f.flags, f.above, c.want, c.flags, c.above)
		}
	}
	// A NUL ends the path for some servers and is dropped by others.
	fs := loosen("/v1/chat/comp%00letions%00.json")
	if fs.n != 2 || fs.f[0].path != "/v1/chat/comp" || fs.f[1].path != "/v1/chat/completions.json" {
		t.Errorf("NUL forms: %+v", fs.all())
	}
	// An empty segment is merged away by some servers, kept by others.
	fs = loosen("/a/%20/b//c")
	if fs.n != 2 || fs.f[0].path != "/a/b/c" || fs.f[1].path != "/a//b//c" {
		t.Errorf("empty segment forms: %+v", fs.all())
	}
}

// testTable is a router with the shapes of routes toolgate registers: the
// built-in APIs under two upstream prefixes, an api_paths template and a
// pattern with text after its parameter, as Gemini's are.
func testTable() *Table {
	t := NewTable()
	h := http.NotFoundHandler()
	for _, prefix := range []string{"", "/anthropic"} {
		for path, name := range Builtin {
			t.AddJudged(name, prefix, path, openaiwire.Error, h, http.MethodPost)
		}
		if prefix == "" {
			t.AddJudged("chat", prefix, "/openai/deployments/{d}/chat/completions", openaiwire.Error, h, http.MethodPost)
			t.AddJudged("chat", prefix, "/v1beta/models/{model}:generateContent", openaiwire.Error, h, http.MethodPost)
			t.AddJudged("chat", prefix, "/mcp/orders", openaiwire.Error, h, http.MethodPost, http.MethodGet, http.MethodDelete)
		}
		t.AddPassThrough(prefix, h)
	}
	return t
}

func TestRouteMatch(t *testing.T) {
	tab := testTable()
	const judge, pass = "judge", "pass"
	cases := []struct {
		method, path string
		body         bool
		want         string // judge, pass, or the refusal reason
		status       int
		use          string // the path to use, or the judged canonical path
	}{
		{"POST", "/v1/chat/completions", true, judge, 0, "/v1/chat/completions"},
		{"POST", "/v1/chat/completion%73", true, judge, 0, "/v1/chat/completions"},
		{"POST", "/v1/%6Dessages", true, judge, 0, "/v1/messages"},
		{"POST", "/anthropic/v1/messages", true, judge, 0, "/anthropic/v1/messages"},
		{"POST", "/%61nthropic/v1/messages", true, judge, 0, "/anthropic/v1/messages"},
		{"POST", "/openai/deployments/gpt-4o/chat/completions", true, judge, 0, "/openai/deployments/gpt-4o/chat/completions"},
		{"POST", "/v1beta/models/gemini-1.5-pro:generateContent", true, judge, 0, "/v1beta/models/gemini-1.5-pro:generateContent"},
		{"GET", "/mcp/orders", false, judge, 0, "/mcp/orders"},
		{"DELETE", "/mcp/orders", false, judge, 0, "/mcp/orders"},

		{"POST", "//v1/chat/completions", true, "slashes", 400, "/v1/chat/completions"},
		{"POST", "/v1//chat/completions", true, "slashes", 400, "/v1/chat/completions"},
		{"POST", "/v1//messages", true, "slashes", 400, "/v1/messages"},
		{"POST", "/v1/chat%2Fcompletions", true, "encoded_separator", 400, "/v1/chat/completions"},
		{"POST", "/v1/chat%5Ccompletions", true, "encoded_separator", 400, "/v1/chat/completions"},
		{"POST", "/v1\\chat\\completions", true, "encoded_separator", 400, "/v1/chat/completions"},
		{"POST", "/v1/chat/completions/", true, "trailing_slash", 400, "/v1/chat/completions"},
		{"POST", "/v1/messages/", true, "trailing_slash", 400, "/v1/messages"},
		{"POST", "/v1/./chat/completions", true, "dot_segment", 400, "/v1/chat/completions"},
		{"POST", "/v1/chat/../chat/completions", true, "dot_segment", 400, "/v1/chat/completions"},
		{"POST", "/v1/chat/completions%2e", true, "dot_segment", 400, "/v1/chat/completions"},
		{"POST", "/V1/chat/completions", true, "case", 400, "/v1/chat/completions"},
		{"POST", "/v1/Chat/Completions", true, "case", 400, "/v1/chat/completions"},
		{"POST", "/v1/me%C5%BF%C5%BFages", true, "encoding", 400, "/v1/messages"},
		{"POST", "/v1/chat/completions;x", true, "path_parameter", 400, "/v1/chat/completions"},
		{"POST", "/v1/chat/completions%20", true, "whitespace", 400, "/v1/chat/completions"},
		{"POST", "/v1/chat/completions%00.json", true, "whitespace", 400, "/v1/chat/completions"},
		{"POST", "/v1/chat/compl%0Aetions", true, "whitespace", 400, "/v1/chat/completions"},
		{"POST", "/v1/chat/completions%3Fx=1", true, "encoded_separator", 400, "/v1/chat/completions"},
		{"POST", "/v1/chat%252Fcompletions", true, "encoding", 400, "/v1/chat/completions"},
		{"POST", "/v1/chat%C0%AFcompletions", true, "encoding", 400, "/v1/chat/completions"},
		{"POST", "/v1/chat%EF%BC%8Fcompletions", true, "encoding", 400, "/v1/chat/completions"},
		{"POST", "/v1/re%73ponses/", true, "trailing_slash", 400, "/v1/responses"},
		{"POST", "/ANTHROPIC/v1/messages", true, "case", 400, "/anthropic/v1/messages"},
		{"POST", "/anthropic//v1/messages", true, "slashes", 400, "/anthropic/v1/messages"},
		{"POST", "/anthropic/x/../v1/messages", true, "dot_segment", 400, "/anthropic/v1/messages"},
		{"POST", "/openai/deployments/gpt-4o/chat/completions/", true, "trailing_slash", 400, "/openai/deployments/gpt-4o/chat/completions"},
		{"POST", "/openai/Deployments/gpt-4o/chat/completions", true, "case", 400, "/openai/deployments/gpt-4o/chat/completions"},
		{"POST", "/openai/deployments//chat/completions", true, "slashes", 400, "/openai/deployments/{d}/chat/completions"},
		{"POST", "/openai/deployments/../chat/completions", true, "dot_segment", 400, "/openai/deployments/{d}/chat/completions"},
		{"POST", "/openai/deployments/a%2Fb/chat/completions", true, "encoded_separator", 400, "/openai/deployments/{d}/chat/completions"},
		{"POST", "/openai/deployments/a%20b/chat/completions", true, "encoding", 400, "/openai/deployments/{d}/chat/completions"},
		{"POST", "/v1/chat/completion\u017f", true, "encoding", 400, "/v1/chat/completions"},
		{"POST", "/v1beta/models/gemini:GenerateContent", true, "case", 400, "/v1beta/models/gemini:generateContent"},
		{"POST", "/v1beta/models/gemini%3AgenerateContent", true, "encoding", 400, "/v1beta/models/gemini:generateContent"},
		{"POST", "/MCP/orders", true, "case", 400, "/mcp/orders"},

		// Methods on a judged route's exact path.
		{"GET", "/v1/chat/completions", false, pass, 0, ""},
		{"HEAD", "/v1/messages", false, pass, 0, ""},
		{"OPTIONS", "/v1/responses", false, pass, 0, ""},
		{"GET", "/v1/chat/completions", true, "method", 405, "/v1/chat/completions"},
		{"PUT", "/v1/chat/completions", true, "method", 405, "/v1/chat/completions"},
		{"PATCH", "/v1/messages", false, "method", 405, "/v1/messages"},
		{"post", "/v1/chat/completions", true, "method", 405, "/v1/chat/completions"},
		{"PUT", "/mcp/orders", true, "method", 405, "/mcp/orders"},
		{"GET", "/v1/Chat/completions", false, "case", 400, "/v1/chat/completions"},

		// Prefixes.
		{"GET", "/Anthropic/v1/models", false, "prefix", 400, "/anthropic/v1/models"},
		{"POST", "/anthropic/../v1/files", true, "dot_segment", 400, "a path without \"..\""},
		{"POST", "/../v1/chat/completions", true, "dot_segment", 400, "a path without \"..\""},

		// Everything else passes.
		{"GET", "/v1/models", false, pass, 0, ""},
		{"GET", "/anthropic/v1/models", false, pass, 0, ""},
		{"POST", "/v1/embeddings", true, pass, 0, ""},
		{"GET", "/v1/responses/resp_123", false, pass, 0, ""},
		{"POST", "/v1/responses/resp_123/cancel", true, pass, 0, ""},
		{"POST", "/v1/chat/completions/chatcmpl-1", true, pass, 0, ""},
		{"POST", "/v1/messages/count_tokens", true, pass, 0, ""},
		{"POST", "/v1/files/a%2Fb//c/./d;x", true, pass, 0, ""},
		{"GET", "/anthropicx/v1/models", false, pass, 0, ""},
		{"OPTIONS", "*", false, pass, 0, ""},
		{"GET", "", false, pass, 0, ""},
	}
	for _, c := range cases {
		d := tab.Match(c.method, c.path, c.body)
		got := ""
		switch d.Kind {
		case Judge:
			got = judge
			if d.Path != c.use {
				t.Errorf("%s %q: judged at %q, want %q", c.method, c.path, d.Path, c.use)
			}
		case Pass:
			got = pass
		case Refuse:
			got = string(d.Reason)
			if d.Status != c.status || d.Use != c.use {
				t.Errorf("%s %q: refused %d use %q, want %d use %q", c.method, c.path, d.Status, d.Use, c.status, c.use)
			}
		}
		if got != c.want {
			t.Errorf("%s %q: %s, want %s", c.method, c.path, got, c.want)
		}
	}
}

// validatedTemplates are testTable's judged routes, full and per prefix.
var validatedTemplates = []struct{ prefix, path string }{
	{"", "/v1/chat/completions"}, {"", "/v1/messages"}, {"", "/v1/responses"},
	{"/anthropic", "/v1/chat/completions"}, {"/anthropic", "/v1/messages"}, {"/anthropic", "/v1/responses"},
	{"", "/openai/deployments/{d}/chat/completions"}, {"", "/v1beta/models/{model}:generateContent"}, {"", "/mcp/orders"},
}

// readings are ways servers in front of a model API read a path, built
// from the standard library alone so that they check the guard's own
// loose form from the outside.
var readings = []func(string) string{
	func(p string) string { return path.Clean(p) },
	func(p string) string { return path.Clean(unescapeAll(p, 1)) },
	func(p string) string {
		p = strings.ReplaceAll(unescapeAll(p, 3), "\\", "/")
		if i := strings.IndexAny(p, "?#\x00"); i >= 0 {
			p = p[:i]
		}
		segs := strings.Split(p, "/")
		for i, s := range segs {
			if j := strings.IndexByte(s, ';'); j >= 0 {
				s = s[:j]
			}
			segs[i] = strings.TrimSpace(s)
		}
		return path.Clean("/" + strings.Join(segs, "/"))
	},
}

func unescapeAll(p string, rounds int) string {
	for i := 0; i < rounds; i++ {
		u, err := url.PathUnescape(p)
		if err != nil || u == p {
			break
		}
		p = u
	}
	return p
}

// readsAs reports whether a server reading p as read would find template.
func readsAs(p, template string) bool {
	got := strings.Split(strings.ToLower(p), "/")
	want := strings.Split(strings.ToLower(template), "/")
	if len(got) != len(want) {
		return false
	}
	for i, w := range want {
		if b, a, ok := strings.Cut(w, "{"); ok {
			_, after, _ := strings.Cut(a, "}")
			if !strings.HasPrefix(got[i], b) || !strings.HasSuffix(got[i][len(b):], after) {
				return false
			}
			continue
		}
		if got[i] != w {
			return false
		}
	}
	return true
}

// FuzzRouteMatch: for any path, toolgate judges it, refuses it, or
// nothing an upstream may do to the path it forwards makes it a judged
// route. A judged path is canonical and is the route itself.
func FuzzRouteMatch(f *testing.F) {
	for _, s := range []string{
		"/v1/chat/completions", "//v1/chat/completions", "/v1/chat/completion%73", "/v1/chat%2Fcompletions",
		"/v1/%6Dessages", "/v1//chat/completions", "/v1/chat/completions/", "/v1/./chat/completions",
		"/v1/chat/../chat/completions", "/V1/chat/completions", "/v1/Chat/Completions", "/v1/chat/completions;x",
		"/v1/chat/completions%20", "/v1//messages", "/v1/messages/", "/anthropic/../v1/messages", "/v1/files/a%2Fb",
		"/openai/deployments/x/chat/completions", "/v1beta/models/g:generateContent", "/v1/chat%252Fcompletions",
		"/v1/chat/completions%00.json", "/v1\\messages", "/anthropic/v1/models", "/v1/models", "*", "",
	} {
		f.Add("POST", s, true)
	}
	f.Add("GET", "/v1/chat/completions", false)
	f.Add("PUT", "/v1/chat/completions", true)
	tab := testTable()
	f.Fuzz(func(t *testing.T, method, raw string, body bool) {
		if raw != "" && raw != "*" && raw[0] != '/' {
			raw = "/" + raw // net/http takes no other request paths
		}
		d := tab.Match(method, raw, body)
		switch d.Kind {
		case Refuse:
			if d.Status < 400 || d.Status > 499 || d.Reason == "" || refusalText[d.Reason] == "" {
				t.Fatalf("refusal %+v", d)
			}
			// The path the refusal names is judged, unless it had to
			// keep a placeholder or an escape from the request.
			if d.Route != nil && !strings.ContainsAny(d.Use, "{%") {
				if u := tab.Match(d.Route.Methods[0], d.Use, true); u.Kind != Judge || u.Route != d.Route {
					t.Fatalf("%q refused naming %q, which is not judged as %s: %+v", raw, d.Use, d.Route.pattern, u)
				}
			}
		case Judge:
			if CanonicalPath(d.Path) != d.Path || !d.Route.judges(method) {
				t.Fatalf("judged %q as %q on %s", raw, d.Path, d.Route.pattern)
			}
			if again := tab.Match(method, d.Path, body); again.Kind != Judge || again.Route != d.Route {
				t.Fatalf("judged %q at %q, which matches %+v", raw, d.Path, again)
			}
			for _, read := range readings {
				if !readsAs(read(d.Path), d.Route.pattern) {
					t.Fatalf("judged %q as %s, but a server may read %q", raw, d.Route.pattern, read(d.Path))
				}
			}
		case Pass:
			if d.read {
				if !readMethod(method) || body || !tab.exact(d.Route, d.Path) {
					t.Fatalf("%s %q with body %v passed as a read of %s", method, raw, body, d.Route.pattern)
				}
				return
			}
			checkPassed(t, tab, raw)
		}
	})
}

// checkPassed fails when a passed path reads as a judged route, as a
// whole or, after its upstream's prefix, as that upstream's route.
func checkPassed(t *testing.T, tab *Table, raw string) {
	sel := tab.selectPrefix(CanonicalPath(raw))
	for _, read := range readings {
		for _, v := range validatedTemplates {
			if readsAs(read(raw), v.prefix+v.path) {
				t.Fatalf("%q passed through, but a server may read it as %s%s", raw, v.prefix, v.path)
			}
			if sel != nil && sel.prefix == v.prefix && sel.prefix != "" {
				rest := AfterSegments(raw, strings.Count(sel.prefix, "/"))
				if readsAs(read(rest), v.path) {
					t.Fatalf("%q passed through to %s, which may read %q as %s", raw, sel.prefix, rest, v.path)
				}
			}
		}
	}
}

// BenchmarkRouteMatch is the guard's cost on the common paths.
func BenchmarkRouteMatch(b *testing.B) {
	tab := testTable()
	for _, p := range []string{"/v1/chat/completions", "/anthropic/v1/messages", "/v1/models", "/v1/chat/completion%73"} {
		b.Run(strings.ReplaceAll(p[1:], "/", "_"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tab.Match(http.MethodPost, p, true)
			}
		})
	}
}

func BenchmarkCanonicalPath(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		CanonicalPath("/v1/chat/completions")
	}
}

// A pattern registered twice (an upstream's api_paths naming a built-in
// path) is served by the last registration, and a refused spelling of it
// names that same route, in its envelope.
func TestRouteRegisteredAgainReplaces(t *testing.T) {
	tab := testTable()
	m := tab.Match(http.MethodPost, "/v1BetA/models/0:generAteContent", true)
	if m.Kind != Refuse || m.Route == nil {
		t.Fatalf("match %+v, want a refusal naming the route", m)
	}
	if m.Route.API != "chat" {
		t.Errorf("refusal names the %s route; the chat route registered last serves the path", m.Route.API)
	}
	if u := tab.Match(http.MethodPost, "/v1beta/models/0:generateContent", true); u.Kind != Judge || u.Route != m.Route {
		t.Errorf("the path is served by %+v, the refusal named %+v", u.Route, m.Route)
	}
}
