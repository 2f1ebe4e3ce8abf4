package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/httpx"
	"github.com/toolgate/toolgate/test/internal/proc"
)

func TestRaiseFileLimitSetsTheSoftLimitToTheHardOne(t *testing.T) {
	var before syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	if before.Max < 10*2+fdSpare {
		t.Skipf("hard limit %d is below what 10 streams need", before.Max)
	}
	if before.Cur == before.Max && before.Cur > 1024 {
		// Lower the soft limit (any process may) so raising it is seen.
		low := syscall.Rlimit{Cur: 1024, Max: before.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
			t.Fatal(err)
		}
	}
	if err := raiseFileLimit(10, fdsPerStream(false)); err != nil {
		t.Fatal(err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur != lim.Max || lim.Max != before.Max {
		t.Fatalf("limits %d/%d after raising, want the soft limit at the hard one, %d", lim.Cur, lim.Max, before.Max)
	}
}

// TestRaiseFileLimitAboveTheHardLimit lowers this test process's hard
// limit (which any process may do, and cannot undo without privilege) and
// asks for more: either the process may raise it and the soft limit
// follows, or the run must stop with an error naming the limit.
func TestRaiseFileLimitAboveTheHardLimit(t *testing.T) {
	low := syscall.Rlimit{Cur: 100, Max: 200}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skipf("cannot lower the file limit here: %v", err)
	}
	err := raiseFileLimit(1000, fdsPerStream(true))
	var lim syscall.Rlimit
	if gerr := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); gerr != nil {
		t.Fatal(gerr)
	}
	need := uint64(1000*fdsPerStream(true) + fdSpare)
	switch {
	case err == nil && lim.Cur < need:
		t.Fatalf("no error, but the soft limit is %d of the %d needed", lim.Cur, need)
	case err != nil && !strings.Contains(err.Error(), "hard RLIMIT_NOFILE is 200"):
		t.Fatalf("error does not name the hard limit: %v", err)
	}
}

// TestUpstreamSpeaksHTTP2ToToolgatesTransport starts the scripted upstream
// as the 10,000-stream run does and reaches it with toolgate's own
// upstream transport, trusting only the certificate the run hands
// toolgate: the request must arrive over HTTP/2, so held streams share
// connections instead of costing one descriptor each.
func TestUpstreamSpeaksHTTP2ToToolgatesTransport(t *testing.T) {
	up := &upstream{release: make(chan struct{})}
	close(up.release)
	var conns, open atomic.Int64
	srv, url, caPath, err := startUpstream(up, t.TempDir(), true, &conns, &open)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	pem, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in " + caPath)
	}
	tr := httpx.NewTransport(5*time.Second, 5*time.Second)
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for range 3 {
		resp, err := client.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(request))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("upstream answered over %s, want HTTP/2", resp.Proto)
		}
		if string(body) != head+callStart+rest {
			t.Fatalf("body %q", body)
		}
	}
	if up.notH2.Load() != 0 || conns.Load() != 1 {
		t.Fatalf("%d requests not over h2, %d connections for 3 requests; want 0 and 1", up.notH2.Load(), conns.Load())
	}
}

func TestNextEventSkipsKeepaliveComments(t *testing.T) {
	br := bufio.NewReader(strings.NewReader(head + ": keepalive\n\n" + callStart + ": keepalive\n\n" + "data: [DONE]\n\n"))
	var got []string
	for {
		ev, err := nextEvent(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if want := []string{head, callStart, "data: [DONE]\n\n"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events %q, want %q", got, want)
	}
}

func TestNextEventReportsACutEvent(t *testing.T) {
	br := bufio.NewReader(strings.NewReader(head + "data: {\"cut"))
	if ev, err := nextEvent(br); err != nil || ev != head {
		t.Fatalf("first event %q, %v", ev, err)
	}
	if _, err := nextEvent(br); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut event: %v, want io.ErrUnexpectedEOF", err)
	}
}

// TestBareProxyServesTheConfigRunWrites starts the -bare stand-in on the
// config run writes: it proxies to the upstream, answers /readyz and
// serves the runtime's metrics the harness scrapes.
func TestBareProxyServesTheConfigRunWrites(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte("upstream saw "), body...))
	}))
	defer up.Close()
	listen, admin := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	text := "listen: " + listen + "\nadmin_listen: " + admin + "\nlog:\n  level: warn\nupstreams:\n  - name: scripted\n    url: " + up.URL + "\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := serveBare(context.Background(), []string{"serve", cfg}); err == nil {
		t.Error("serveBare took arguments without --config")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveBare(ctx, []string{"serve", "--config", cfg}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveBare: %v", err)
		}
	}()
	if err := proc.WaitReady(ctx, "http://"+admin+"/readyz", nil); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+listen+"/v1/chat/completions", "application/json", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "upstream saw hello" {
		t.Errorf("proxied answer %q", got)
	}
	if m, err := proc.Scrape(admin, "go_goroutines"); err != nil || m["go_goroutines"] == 0 {
		t.Errorf("metrics: %v %v", m, err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}
