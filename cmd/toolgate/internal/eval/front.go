package eval

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy/upstream"
)

// caseHeader carries a case's ticket from eval through toolgate to the
// front. toolgate forwards it like any client header; the front removes it
// before anything reaches the provider.
const caseHeader = "Toolgate-Eval-Case"

// front is the in-process toolgate's upstream. It answers the first call of
// each case with the case's bad call, as if the model had sent it, and
// passes every later call (the re-query toolgate builds) to the config's
// first upstream, with that upstream's key, through the client serve uses.
type front struct {
	server   *http.Server
	listener net.Listener
	proxy    *httputil.ReverseProxy

	mu      sync.Mutex
	tickets map[string]*ticket
	seq     uint64
}

// ticket is one attempt at one case, as the front sees it.
type ticket struct {
	id     string
	answer []byte

	mu       sync.Mutex
	answered bool
	// latency is the last re-query's round trip to the provider.
	latency time.Duration
	// failure is why the last re-query got no answer, in words.
	failure string
}

type ticketKey struct{}

// startFront serves the front on a loopback port. endpoint is where
// re-queries go; key, when set, is put where the provider at endpoint
// reads it.
func startFront(up catalog.Upstream, endpoint, key string) (*front, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	host := target.Hostname()
	f := &front{tickets: map[string]*ticket{}}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := *target
			pr.Out.URL, pr.Out.Host = &u, ""
			pr.Out.Header.Del(caseHeader)
			// The transport then negotiates compression itself and hands
			// toolgate plain bytes, as it does for serve.
			pr.Out.Header.Del("Accept-Encoding")
			if key != "" {
				upstream.SetKey(pr.Out.Header, host, catalog.APIChat, key)
			}
		},
		Transport:      upstream.NewClient(up).Transport,
		ModifyResponse: noteStatus,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				ticketOf(r.Context()).fail("the upstream could not be reached: " + err.Error())
			}
			w.WriteHeader(http.StatusBadGateway)
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	if f.listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	f.server = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = f.server.Serve(f.listener) }()
	return f, nil
}

// URL is the front's base URL.
func (f *front) URL() string { return "http://" + f.listener.Addr().String() }

func (f *front) close() { _ = f.server.Close() }

// issue registers one attempt at a case whose first answer is answer.
func (f *front) issue(answer []byte) *ticket {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	t := &ticket{id: strconv.FormatUint(f.seq, 10), answer: answer}
	f.tickets[t.id] = t
	return t
}

func (f *front) drop(t *ticket) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tickets, t.id)
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	t := f.tickets[r.Header.Get(caseHeader)]
	f.mu.Unlock()
	if t == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"toolgate eval: this request belongs to no case","type":"invalid_request_error"}}`)
		return
	}
	if t.firstCall() {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(t.answer)))
		_, _ = w.Write(t.answer)
		return
	}
	start := time.Now()
	// Deferred: a body cut off mid-copy ends the handler with a panic.
	defer func() { t.setLatency(time.Since(start)) }()
	f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ticketKey{}, t)))
}

// noteStatus keeps a failed re-query's status and the start of its body,
// which toolgate's escalation does not carry, for the result's error.
func noteStatus(resp *http.Response) error {
	t := ticketOf(resp.Request.Context())
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		t.fail("")
		return nil
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	t.fail(fmt.Sprintf("the upstream answered status %d: %s", resp.StatusCode, snippet(head)))
	return nil
}

// ticketOf is the ticket of a forwarded request; every one has one.
func ticketOf(ctx context.Context) *ticket {
	t, _ := ctx.Value(ticketKey{}).(*ticket)
	return t
}

// firstCall reports whether this is the attempt's first call, and marks it
// answered.
func (t *ticket) firstCall() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := !t.answered
	t.answered = true
	return first
}

func (t *ticket) setLatency(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.latency = d
}

// fail records why the re-query failed; "" when it did not.
func (t *ticket) fail(why string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failure = why
}

// seen returns the last re-query's latency and failure.
func (t *ticket) seen() (time.Duration, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.latency, t.failure
}
