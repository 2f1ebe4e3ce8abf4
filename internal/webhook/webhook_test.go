package webhook

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/signature"
)

func TestDeliverSignsAndGivesUpAfterAttempts(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(signature.Header) != signature.Sign([]byte("k"), body) || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("unsigned or untyped POST")
		}
		calls.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	p := New(srv.URL, "k", Retry{Attempts: 3, Base: time.Millisecond, Max: 2 * time.Millisecond, Timeout: time.Second})
	defer p.Close()
	if err := p.Deliver([]byte(`{}`)); err == nil {
		t.Fatal("a receiver answering 500 counted as delivered")
	}
	if calls.Load() != 3 {
		t.Fatalf("%d POSTs, want 3", calls.Load())
	}
}

func TestCloseAbandonsRetries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	p := New(srv.URL, "", Retry{Attempts: 5, Base: time.Hour, Max: time.Hour, Timeout: time.Second})
	done := make(chan error, 1)
	go func() { done <- p.Deliver([]byte(`{}`)) }()
	time.Sleep(50 * time.Millisecond)
	p.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("an abandoned delivery reported success")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the backoff wait")
	}
}
