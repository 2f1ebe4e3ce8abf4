package sink

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"github.com/toolgate/toolgate/internal/signature"
)

// fileSink appends records to a JSONL file. Each record is one write() of a
// whole line to a file opened with O_APPEND, so lines never interleave, and
// the file is fsynced after each record: an escalation is a rare event whose
// loss costs more than the sync. Rotation is left to the platform (logrotate
// with copytruncate, or a log shipper); the file is reopened on each reload.
type fileSink struct {
	f *os.File
}

func openFile(path string) (*fileSink, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("escalation.sinks.file: %w", err)
	}
	return &fileSink{f: f}, nil
}

func (s *fileSink) name() string { return "file" }

func (s *fileSink) write(line []byte) error {
	buf := make([]byte, 0, len(line)+1)
	buf = append(append(buf, line...), '\n')
	if _, err := s.f.Write(buf); err != nil {
		return err
	}
	return s.f.Sync()
}

func (s *fileSink) close() error { return s.f.Close() }

// Webhook delivery bounds.
var (
	webhookTimeout  = 10 * time.Second
	webhookAttempts = 8
	backoffBase     = 500 * time.Millisecond
	backoffMax      = 30 * time.Second
)

// webhookSink POSTs each record, signed, retrying with exponential backoff
// and full jitter. It runs on the sink's own goroutine, so retries delay
// only later records, never a response.
type webhookSink struct {
	url    string
	secret []byte
	client *http.Client
	ctx    context.Context
	cancel context.CancelFunc
}

func newWebhook(url, secret string) *webhookSink {
	ctx, cancel := context.WithCancel(context.Background())
	return &webhookSink{
		url:    url,
		secret: []byte(secret),
		ctx:    ctx,
		cancel: cancel,
		client: &http.Client{
			Timeout: webhookTimeout,
			// A redirect could carry the record somewhere unintended.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

func (s *webhookSink) name() string { return "webhook" }

// Sign returns the X-Toolgate-Signature value for body.
func Sign(secret, body []byte) string { return signature.Sign(secret, body) }

func (s *webhookSink) write(line []byte) error {
	var last error
	for attempt := 0; attempt < webhookAttempts; attempt++ {
		if attempt > 0 {
			d := backoffBase << (attempt - 1)
			if d > backoffMax || d <= 0 {
				d = backoffMax
			}
			select {
			case <-time.After(time.Duration(rand.Int64N(int64(d)) + 1)):
			case <-s.ctx.Done():
				return s.ctx.Err()
			}
		}
		if last = s.post(line); last == nil {
			return nil
		}
	}
	return last
}

func (s *webhookSink) post(line []byte) error {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.url, bytes.NewReader(line))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolgate")
	if len(s.secret) > 0 {
		req.Header.Set("X-Toolgate-Signature", Sign(s.secret, line))
	}
	resp, err := s.client.Do(req)
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

// close gives queued records a moment to go out, then abandons retries.
func (s *webhookSink) close() error {
	s.cancel()
	return nil
}
