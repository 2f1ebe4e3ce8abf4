// Package webhook delivers signed JSON bodies to an operator's endpoint,
// retrying with backoff: the one way toolgate's sinks and notifications
// POST records out of the request path.
package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/internal/signature"
)

// Retry bounds one delivery.
type Retry struct {
	// Attempts is the number of POSTs before the body is given up.
	Attempts int
	// Base is the first backoff; each later one doubles, up to Max, and
	// each wait is drawn uniformly below it (full jitter).
	Base, Max time.Duration
	// Timeout bounds one POST.
	Timeout time.Duration
}

// DefaultRetry is what the sinks and notifications use.
var DefaultRetry = Retry{Attempts: 8, Base: 500 * time.Millisecond, Max: 30 * time.Second, Timeout: 10 * time.Second}

// Poster POSTs bodies to one URL, signed with X-Toolgate-Signature when it
// has a secret. It runs on its caller's goroutine: callers keep it off the
// request path with a queue of their own.
type Poster struct {
	url    string
	secret []byte
	retry  Retry
	client *http.Client
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a Poster for url; an empty secret signs nothing.
func New(url, secret string, r Retry) *Poster {
	ctx, cancel := context.WithCancel(context.Background())
	return &Poster{
		url:    url,
		secret: []byte(secret),
		retry:  r,
		ctx:    ctx,
		cancel: cancel,
		client: &http.Client{
			Timeout: r.Timeout,
			// A redirect could carry the body somewhere unintended.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// Deliver POSTs body until a 2xx answer, the attempts run out, or Close.
func (p *Poster) Deliver(body []byte) error {
	var last error
	for attempt := 0; attempt < max(p.retry.Attempts, 1); attempt++ {
		if attempt > 0 {
			d := p.retry.Base << (attempt - 1)
			if d > p.retry.Max || d <= 0 {
				d = p.retry.Max
			}
			select {
			case <-time.After(time.Duration(rand.Int64N(int64(max(d, 1))) + 1)):
			case <-p.ctx.Done():
				return p.ctx.Err()
			}
		}
		if last = p.Post(body); last == nil {
			return nil
		}
	}
	return last
}

// Post makes one attempt.
func (p *Poster) Post(body []byte) error {
	req, err := http.NewRequestWithContext(p.ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolgate")
	if len(p.secret) > 0 {
		req.Header.Set(signature.Header, signature.Sign(p.secret, body))
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %d", resp.StatusCode)
	}
	return nil
}

// Close abandons the retries in progress and any later ones.
func (p *Poster) Close() { p.cancel() }
