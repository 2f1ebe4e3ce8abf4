package test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The path guard from the outside: every spelling of a judged route is
// judged as that route or refused with nothing forwarded, and every other
// path reaches its upstream as the client wrote it.

// pathGate starts toolgate in front of two upstreams: root (prefix "",
// with an Azure-style api_paths template) and anthropic (prefix
// /anthropic). Both answer every judged route with a call to an invented
// tool, so a request that passes the judge unjudged shows as a 200.
func pathGate(t *testing.T, rest ...string) (g *gate, root, anth *faultUpstream) {
	t.Helper()
	script := func(_ int, r *faultRequest) faultAction {
		if r.Method != http.MethodPost {
			return fuJSON(`{"object":"list","data":[]}`)
		}
		for _, api := range []string{"chat", "messages", "responses"} {
			if strings.HasSuffix(r.Path, secRoutes[api][len("/v1"):]) {
				return secAnswer(api, r.Stream, invented.Name, invented.Args)
			}
		}
		return fuJSON(`{"ok":true}`)
	}
	root, anth = newFaultUpstream(t, script), newFaultUpstream(t, script)
	cfg := "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n" +
		"  - name: root\n    url: " + root.srv.URL + "\n    api_paths:\n      \"/openai/deployments/{d}/chat/completions\": chat\n" +
		"  - name: anthropic\n    url: " + anth.srv.URL + "\n    path_prefix: /anthropic\n" +
		catalogYAML(t, "") + "recovery:\n  max_attempts: 0\n" + strings.Join(rest, "")
	return startGate(t, cfg), root, anth
}

// rawResult is one answer read off a raw connection.
type rawResult struct {
	Status int
	Header http.Header
	Body   []byte
}

// rawSend writes requests on one connection exactly as given (request
// line, headers and body bytes) and reads an answer per method given.
func rawSend(t *testing.T, g *gate, wire string, methods ...string) []rawResult {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, wire); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var out []rawResult
	for i, m := range methods {
		// The method tells a HEAD answer's length from its body's.
		resp, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			t.Fatalf("answer %d of %d: %v", i+1, len(methods), err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out = append(out, rawResult{resp.StatusCode, resp.Header, b})
	}
	return out
}

// rawRequest is one request in wire form; header holds "Name: value" lines.
func rawRequest(method, target string, body []byte, header ...string) string {
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/1.1\r\n")
	hasType, hasHost := false, false
	for _, h := range header {
		hasType = hasType || strings.HasPrefix(strings.ToLower(h), "content-type:")
		hasHost = hasHost || strings.HasPrefix(strings.ToLower(h), "host:")
		b.WriteString(h + "\r\n")
	}
	if !hasHost {
		b.WriteString("Host: toolgate\r\n")
	}
	if !hasType {
		b.WriteString("Content-Type: application/json\r\n")
	}
	if body != nil {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.String()
}

func rawDo(t *testing.T, g *gate, method, target string, body []byte, header ...string) rawResult {
	t.Helper()
	return rawSend(t, g, rawRequest(method, target, body, header...), method)[0]
}

// guardedRoute is one route the guard must hold, as a client would spell
// it, with the upstream that serves it.
type guardedRoute struct {
	api, path string
	anth      bool
}

var guardedRoutes = []guardedRoute{
	{"chat", "/v1/chat/completions", false},
	{"messages", "/v1/messages", false},
	{"responses", "/v1/responses", false},
	{"chat", "/anthropic/v1/chat/completions", true},
	{"messages", "/anthropic/v1/messages", true},
	{"responses", "/anthropic/v1/responses", true},
	{"chat", "/openai/deployments/gpt4o/chat/completions", false},
}

// spelling rewrites a route's path; judged spellings are the same
// resource by RFC 3986, every other one is refused for reason.
type spelling struct {
	name   string
	spell  func(p string) string
	reason string // "" when judged
}

// lastSlash and firstSlash find the slash before a path's last segment
// and the one after its first.
func lastSlash(p string) int  { return strings.LastIndexByte(p, '/') }
func firstSlash(p string) int { return strings.IndexByte(p[1:], '/') + 1 }

var spellings = []spelling{
	{"as configured", func(p string) string { return p }, ""},
	{"last letter escaped", func(p string) string { return p[:len(p)-1] + fmt.Sprintf("%%%02X", p[len(p)-1]) }, ""},
	{"first letter of the last segment escaped in lower-case hex", func(p string) string {
		i := lastSlash(p) + 1
		return p[:i] + fmt.Sprintf("%%%02x", p[i]) + p[i+1:]
	}, ""},
	{"query beta=true", func(p string) string { return p + "?beta=true" }, ""},
	{"query alt=sse", func(p string) string { return p + "?alt=sse" }, ""},
	{"query api-version", func(p string) string { return p + "?api-version=2024-10-21" }, ""},
	{"absolute form with another host", func(p string) string { return "http://api.evil.example" + p }, ""},
	{"leading double slash", func(p string) string { return "/" + p }, "slashes"},
	{"double slash after the first segment", func(p string) string { i := firstSlash(p); return p[:i] + "/" + p[i:] }, "slashes"},
	{"double slash before the last segment", func(p string) string { i := lastSlash(p); return p[:i] + "/" + p[i:] }, "slashes"},
	{"trailing slash", func(p string) string { return p + "/" }, "trailing_slash"},
	{"dot segment", func(p string) string { i := firstSlash(p); return p[:i] + "/." + p[i:] }, "dot_segment"},
	{"dot-dot segment", func(p string) string { i := lastSlash(p); return p[:i] + "/x/.." + p[i:] }, "dot_segment"},
	{"dot-dot back into the same segment", func(p string) string {
		i := lastSlash(p)
		j := lastSlash(p[:i])
		return p[:i] + "/.." + p[j:i] + p[i:]
	}, "dot_segment"},
	{"encoded dot-dot segment", func(p string) string { i := lastSlash(p); return p[:i] + "/x/%2e%2E" + p[i:] }, "dot_segment"},
	{"encoded trailing dot", func(p string) string { return p + "%2e" }, "dot_segment"},
	{"first segment upper case", func(p string) string { i := firstSlash(p); return strings.ToUpper(p[:i]) + p[i:] }, "case"},
	{"title case", func(p string) string {
		segs := strings.Split(p, "/")
		for i, s := range segs {
			if s != "" {
				segs[i] = strings.ToUpper(s[:1]) + s[1:]
			}
		}
		return strings.Join(segs, "/")
	}, "case"},
	{"long s for s", func(p string) string {
		i := lastSlash(p)
		return p[:i] + strings.Replace(p[i:], "s", "%C5%BF", 1)
	}, "encoding"},
	{"encoded slash", func(p string) string { i := lastSlash(p); return p[:i] + "%2F" + p[i+1:] }, "encoded_separator"},
	{"encoded slash, lower-case hex", func(p string) string { i := lastSlash(p); return p[:i] + "%2f" + p[i+1:] }, "encoded_separator"},
	{"encoded backslash", func(p string) string { i := lastSlash(p); return p[:i] + "%5C" + p[i+1:] }, "encoded_separator"},
	{"raw backslash", func(p string) string { i := lastSlash(p); return p[:i] + "\\" + p[i+1:] }, "encoded_separator"},
	{"encoded question mark", func(p string) string { return p + "%3Fx=1" }, "encoded_separator"},
	{"raw fragment", func(p string) string { return p + "#x" }, "encoded_separator"},
	{"path parameter", func(p string) string { return p + ";x" }, "path_parameter"},
	{"trailing space", func(p string) string { return p + "%20" }, "whitespace"},
	{"trailing tab", func(p string) string { return p + "%09" }, "whitespace"},
	{"NUL", func(p string) string { return p + "%00.json" }, "whitespace"},
	{"double-encoded slash", func(p string) string { i := lastSlash(p); return p[:i] + "%252F" + p[i+1:] }, "encoding"},
	{"overlong UTF-8 slash", func(p string) string { i := lastSlash(p); return p[:i] + "%C0%AF" + p[i+1:] }, "encoding"},
	{"fullwidth slash", func(p string) string { i := lastSlash(p); return p[:i] + "%EF%BC%8F" + p[i+1:] }, "encoding"},
}

// canonicalTarget is where a judged spelling must arrive: the route's
// path after the prefix, and the query as sent.
func canonicalTarget(r guardedRoute, target string) string {
	p := strings.TrimPrefix(r.path, "/anthropic")
	if _, q, ok := strings.Cut(target, "?"); ok {
		return p + "?" + q
	}
	return p
}

// The table and every spelling found since, on every judged
// route: judged as the route (the invented call escalates, the upstream
// gets the canonical path), or refused in the route's envelope with
// nothing forwarded. Refusals are counted by reason and by API.
func TestPathGuardSpellings(t *testing.T) {
	g, root, anth := pathGate(t)
	refused := map[string]int{}
	refusedAPI := map[string]int{}
	for _, r := range guardedRoutes {
		for _, sp := range spellings {
			target := sp.spell(r.path)
			t.Run(r.path+"/"+sp.name, func(t *testing.T) {
				nRoot, nAnth := root.count(), anth.count()
				res := rawDo(t, g, http.MethodPost, target, secRequest(r.api, false))
				gotRoot, gotAnth := root.requests()[nRoot:], anth.requests()[nAnth:]
				if sp.reason == "" {
					expectJudged(t, res, target)
					up, other := gotRoot, gotAnth
					if r.anth {
						up, other = gotAnth, gotRoot
					}
					if len(up) != 1 || len(other) != 0 || up[0].RequestURI != canonicalTarget(r, target) {
						t.Fatalf("%q: upstream requests %v / %v, want one at %q", target, uris(up), uris(other), canonicalTarget(r, target))
					}
					return
				}
				refused[sp.reason]++
				refusedAPI[r.api]++
				expectRefused(t, res, r.api, http.StatusBadRequest, sp.reason)
				if len(gotRoot)+len(gotAnth) != 0 {
					t.Fatalf("%q was refused, yet the upstreams got %v %v", target, uris(gotRoot), uris(gotAnth))
				}
			})
		}
	}
	m := scrape(t, g)
	for reason, n := range refused {
		expectMetric(t, m, `toolgate_route_refusals_total{reason="`+reason+`"}`, n)
	}
	for api, n := range refusedAPI {
		expectMetric(t, m, `toolgate_requests_total{api="`+api+`",outcome="refused"}`, n)
	}
}

func uris(rs []faultRequest) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Method+" "+r.RequestURI)
	}
	return out
}

// expectJudged checks an escalation of the invented call.
func expectJudged(t *testing.T, res rawResult, target string) {
	t.Helper()
	if res.Status != http.StatusUnprocessableEntity || !bytes.Contains(res.Body, []byte("tool_call_escalation")) {
		t.Fatalf("%q: status %d body %.300s, want the invented call escalated", target, res.Status, res.Body)
	}
}

// expectRefused checks a refusal in the route's own envelope.
func expectRefused(t *testing.T, res rawResult, api string, status int, reason string) {
	t.Helper()
	if res.Status != status || res.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("status %d body %.300s, want a %d refusal", res.Status, res.Body, status)
	}
	want := `{"error":{"type":"invalid_request_error","code":"` + reason + `","message":"toolgate refused this request: `
	if api == "messages" {
		want = `{"type":"error","error":{"type":"invalid_request_error","code":"` + reason + `","message":"toolgate refused this request: `
	}
	if !bytes.HasPrefix(res.Body, []byte(want)) {
		t.Fatalf("body %s, want it to begin %s", res.Body, want)
	}
}

func scrape(t *testing.T, g *gate) string {
	t.Helper()
	resp, err := http.Get("http://" + g.App.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func expectMetric(t *testing.T, metrics, series string, want int) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(metrics)
	if m == nil || m[1] != strconv.Itoa(want) {
		t.Errorf("%s = %v, want %d", series, m, want)
	}
}

// Methods on a judged route's exact path: POST is judged; reads without a
// body pass through (OpenAI lists stored chat completions with GET); any
// other method, a read with a body, or an upgrade, is refused.
func TestPathGuardMethods(t *testing.T) {
	g, root, _ := pathGate(t)
	body := secRequest("chat", false)
	cases := []struct {
		method, path string
		body         []byte
		header       []string
		status       int
		reason       string // "" when it passes through
	}{
		{"GET", "/v1/chat/completions", nil, nil, 200, ""},
		{"HEAD", "/v1/messages", nil, nil, 200, ""},
		{"OPTIONS", "/v1/responses", nil, nil, 200, ""},
		{"GET", "/v1/responses/resp_123", nil, nil, 200, ""},
		{"PUT", "/v1/chat/completions", body, nil, 405, "method"},
		{"PATCH", "/v1/messages", secRequest("messages", false), nil, 405, "method"},
		{"DELETE", "/v1/responses", body, nil, 405, "method"},
		{"GET", "/v1/chat/completions", body, nil, 405, "method"},
		{"post", "/v1/chat/completions", body, nil, 405, "method"},
		{"GET", "/v1/responses", nil, []string{"Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="}, 400, "method"},
		{"GET", "/v1/chat/completions", nil, []string{"X-HTTP-Method-Override: POST"}, 400, "override_header"},
		{"POST", "/v1/chat/completions", body, []string{"x-http-method-override: GET"}, 400, "override_header"},
		{"POST", "/v1/files", []byte(`{}`), []string{"X-Original-URL: /v1/chat/completions"}, 400, "override_header"},
		{"POST", "/v1/files", []byte(`{}`), []string{"x-rewrite-url: //v1/chat/completions?x=1"}, 400, "override_header"},
		{"POST", "/v1/files", []byte(`{}`), []string{"X-Override-URL: http://api.openai.com/v1/Chat/completions"}, 400, "override_header"},
		{"POST", "/v1/files", []byte(`{}`), []string{"X-Original-URL: /v1/files"}, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path+" "+strings.Join(c.header, " "), func(t *testing.T) {
			n := root.count()
			res := rawDo(t, g, c.method, c.path, c.body, c.header...)
			got := root.requests()[n:]
			if c.reason == "" {
				if res.Status != c.status || len(got) != 1 || got[0].Method != c.method || got[0].RequestURI != c.path {
					t.Fatalf("status %d, upstream got %v; want it passed through", res.Status, uris(got))
				}
				return
			}
			api := "chat"
			if strings.Contains(c.path, "messages") {
				api = "messages"
			}
			expectRefused(t, res, api, c.status, c.reason)
			if c.status == 405 && res.Header.Get("Allow") != "POST" {
				t.Errorf("Allow %q", res.Header.Get("Allow"))
			}
			if len(got) != 0 {
				t.Fatalf("refused, yet the upstream got %v", uris(got))
			}
		})
	}
}

// Bodies toolgate would judge differently from the upstream: a compressed
// body is refused with 415 on a judged route (in any header case) and
// passes elsewhere; a Content-Type the upstream ignores, none at all, or
// chunked framing is judged all the same.
func TestPathGuardBodies(t *testing.T) {
	g, root, _ := pathGate(t)
	gz := gzipBytes(secRequest("chat", false))
	for _, api := range []string{"chat", "messages", "responses"} {
		for _, h := range []string{"Content-Encoding: gzip", "content-encoding: GZIP", "Content-Encoding: identity, br"} {
			t.Run(api+" "+h, func(t *testing.T) {
				n := root.count()
				res := rawDo(t, g, "POST", secRoutes[api], gz, h)
				expectRefused(t, res, api, http.StatusUnsupportedMediaType, "content_encoding")
				if res.Header.Get("Accept-Encoding") != "identity" || root.count() != n {
					t.Fatalf("Accept-Encoding %q, upstream requests %d", res.Header.Get("Accept-Encoding"), root.count()-n)
				}
			})
		}
	}
	t.Run("pass-through keeps its encoding", func(t *testing.T) {
		n := root.count()
		res := rawDo(t, g, "POST", "/v1/files", gz, "Content-Encoding: gzip")
		got := root.requests()[n:]
		if res.Status != 200 || len(got) != 1 || !bytes.Equal(got[0].Body, gz) || got[0].Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("status %d, upstream %v", res.Status, uris(got))
		}
	})
	body := secRequest("chat", false)
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	for name, wire := range map[string]string{
		"identity":       rawRequest("POST", "/v1/chat/completions", body, "Content-Encoding: identity"),
		"text/plain":     rawRequest("POST", "/v1/chat/completions", body, "Content-Type: text/plain"),
		"form":           rawRequest("POST", "/v1/chat/completions", body, "Content-Type: application/x-www-form-urlencoded"),
		"chunked":        "POST /v1/chat/completions HTTP/1.1\r\nHost: toolgate\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked,
		"host header":    rawRequest("POST", "/v1/chat/completions", body, "Host: api.anthropic.com"),
		"forwarded host": rawRequest("POST", "/v1/chat/completions", body, "X-Forwarded-Host: api.openai.com"),
	} {
		t.Run(name, func(t *testing.T) {
			n := root.count()
			expectJudged(t, rawSend(t, g, wire, "POST")[0], name)
			if got := root.requests()[n:]; len(got) != 1 || got[0].RequestURI != "/v1/chat/completions" {
				t.Fatalf("upstream got %v", uris(got))
			}
		})
	}
}

// HTTP/1.1 framing: pipelined requests are each judged or refused on
// their own, a body cannot smuggle a second request past the guard, and a
// transfer coding net/http cannot read never reaches the upstream.
func TestPathGuardFraming(t *testing.T) {
	g, root, _ := pathGate(t)
	body := secRequest("chat", false)
	t.Run("pipelined", func(t *testing.T) {
		n := root.count()
		res := rawSend(t, g, rawRequest("POST", "/v1/chat/completions", body)+
			rawRequest("POST", "/v1//chat/completions", body)+
			rawRequest("POST", "/v1/chat/completions/", body), "POST", "POST", "POST")
		expectJudged(t, res[0], "first")
		expectRefused(t, res[1], "chat", 400, "slashes")
		expectRefused(t, res[2], "chat", 400, "trailing_slash")
		if got := root.requests()[n:]; len(got) != 1 || got[0].RequestURI != "/v1/chat/completions" {
			t.Fatalf("upstream got %v", uris(got))
		}
	})
	t.Run("length and chunked both", func(t *testing.T) {
		n := root.count()
		hidden := rawRequest("POST", "//v1/chat/completions", body, "Connection: close")
		wire := "POST /v1/files HTTP/1.1\r\nHost: toolgate\r\nContent-Length: " + strconv.Itoa(5+len(hidden)) +
			"\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + hidden
		conn, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(conn, wire)
		all, _ := io.ReadAll(conn)
		for _, rq := range root.requests()[n:] {
			if rq.Method == "POST" && strings.Contains(rq.RequestURI, "chat/completions") {
				t.Fatalf("the hidden request reached the upstream: %s %s", rq.Method, rq.RequestURI)
			}
		}
		// The chunked framing wins (RFC 9112 §6.3), so what follows the
		// empty body is a request of its own, which the guard refuses.
		if bytes.Contains(all, []byte("fetch_weather_report")) || !bytes.Contains(all, []byte(`"code":"slashes"`)) {
			t.Fatalf("want the hidden request refused on its own, got:\n%s", all)
		}
	})
	t.Run("unknown transfer coding", func(t *testing.T) {
		n := root.count()
		chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
		res := rawSend(t, g, "POST /v1/chat/completions HTTP/1.1\r\nHost: toolgate\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"+chunked, "POST")[0]
		if res.Status < 400 || root.count() != n {
			t.Fatalf("status %d, upstream requests %d", res.Status, root.count()-n)
		}
	})
}

// upstreams[].path_prefix: only the configured spelling selects an
// upstream, and the path after it may not climb out; everything else
// passes through with the client's bytes after the prefix.
func TestPathGuardPrefixesAndPassThrough(t *testing.T) {
	g, root, anth := pathGate(t)
	cases := []struct {
		method, target string
		reason         string // refused for this reason
		anth           bool   // else root
		want           string // the target the upstream gets
	}{
		{"GET", "/Anthropic/v1/models", "prefix", false, ""},
		{"GET", "/ANTHROPIC/v1/files/x", "prefix", false, ""},
		{"GET", "/%61nthropic%2Fv1/models", "prefix", false, ""},
		{"POST", "/anthropic/../v1/chat/completions", "dot_segment", false, ""},
		{"POST", "/../anthropic/v1/messages", "dot_segment", false, ""},
		{"POST", "/anthropic/v1/files/../../../v1/chat/completions", "dot_segment", false, ""},
		{"GET", "/anthropic/v1/models", "", true, "/v1/models"},
		{"GET", "/%61nthropic/v1/models", "", true, "/v1/models"},
		{"GET", "/anthropic", "", true, ""},
		{"GET", "/anthropicx/v1/models", "", false, "/anthropicx/v1/models"},
		{"GET", "/v1/files/a%2Fb/%7e/caf%C3%A9;v=1//x/./y/?q=%2F&x", "", false, "/v1/files/a%2Fb/%7e/caf%C3%A9;v=1//x/./y/?q=%2F&x"},
		{"GET", "/anthropic/v1/files/a%2fb%20c", "", true, "/v1/files/a%2fb%20c"},
		{"POST", "/v1/chat/completions/chatcmpl-123", "", false, "/v1/chat/completions/chatcmpl-123"},
		{"POST", "/v1/messages/count_tokens", "", false, "/v1/messages/count_tokens"},
		{"GET", "/v1/files/{id}/caf\xc3\xa9", "", false, "/v1/files/{id}/caf\xc3\xa9"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.target, func(t *testing.T) {
			nRoot, nAnth := root.count(), anth.count()
			var body []byte
			if c.method == "POST" {
				body = []byte(`{"model":"m"}`)
			}
			res := rawDo(t, g, c.method, c.target, body)
			gotRoot, gotAnth := root.requests()[nRoot:], anth.requests()[nAnth:]
			if c.reason != "" {
				expectRefused(t, res, "chat", 400, c.reason)
				if len(gotRoot)+len(gotAnth) != 0 {
					t.Fatalf("refused, yet the upstreams got %v %v", uris(gotRoot), uris(gotAnth))
				}
				return
			}
			up, other, srv := gotRoot, gotAnth, root
			if c.anth {
				up, other, srv = gotAnth, gotRoot, anth
			}
			want := c.want
			if want == "" {
				want = "/"
			}
			// Bytes url.URL would escape go out in absolute form.
			got := ""
			if len(up) == 1 {
				got = strings.TrimPrefix(up[0].RequestURI, srv.srv.URL)
			}
			if res.Status != 200 || len(up) != 1 || len(other) != 0 || got != want {
				t.Fatalf("status %d, upstream got %q (others %v), want %q", res.Status, got, uris(other), want)
			}
		})
	}
}

// Shadow mode forwards unchanged: a spelling enforce mode refuses goes
// upstream as sent, and is counted as a refusal toolgate would make.
func TestPathGuardShadow(t *testing.T) {
	g, root, _ := pathGate(t, "mode: shadow\n")
	res := rawDo(t, g, "POST", "/v1/chat/completions", secRequest("chat", false))
	if res.Status != 200 || !strings.HasPrefix(res.Header.Get("X-Toolgate-Outcome"), "shadow-would-") {
		t.Fatalf("status %d outcome %q, want the shadow judge's verdict", res.Status, res.Header.Get("X-Toolgate-Outcome"))
	}
	n := root.count()
	res = rawDo(t, g, "POST", "//v1/chat/completions", secRequest("chat", false))
	got := root.requests()[n:]
	if res.Status != 200 || len(got) != 1 || got[0].RequestURI != "//v1/chat/completions" {
		t.Fatalf("status %d, upstream got %v, want the request forwarded as sent", res.Status, uris(got))
	}
	m := scrape(t, g)
	expectMetric(t, m, `toolgate_route_refusals_total{reason="slashes"}`, 1)
	expectMetric(t, m, `toolgate_requests_total{api="chat",outcome="shadow-would-refuse"}`, 1)
}

// A base URL with one slash too many, as a client library joining
// "…/v1/" and "/chat/completions" makes: the official SDK gets a 400 it
// raises as an API error whose code and message say which path to use.
func TestPathGuardSDKBaseURL(t *testing.T) {
	g, root, _ := pathGate(t)
	client := openai.NewClient(option.WithBaseURL(g.URL+"/v1//"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(context.Background(), fixtureParams(t))
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || ae.Code != "slashes" ||
		!strings.Contains(ae.Message, "Send it to /v1/chat/completions") {
		t.Fatalf("err %v, want a 400 naming /v1/chat/completions", err)
	}
	if root.count() != 0 {
		t.Fatalf("the upstream got %v", uris(root.requests()))
	}
}
