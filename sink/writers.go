package sink

import (
	"fmt"
	"os"

	"github.com/toolgate/toolgate/internal/signature"
	"github.com/toolgate/toolgate/internal/webhook"
)

// fileSink appends records to a JSONL file. Each record is one write() of a
// whole line to a file opened with O_APPEND, so lines never interleave, and
// the file is fsynced after each record: an escalation is a rare event whose
// loss costs more than the sync. Rotation is left to the platform (logrotate
// with copytruncate, or a log shipper); the file is reopened on each reload.
type fileSink struct {
	file *os.File
}

func openFile(path string) (*fileSink, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("escalation.sinks.file: %w", err)
	}
	return &fileSink{file: f}, nil
}

func (s *fileSink) name() string { return "file" }

func (s *fileSink) write(line []byte) error {
	buf := make([]byte, 0, len(line)+1)
	buf = append(append(buf, line...), '\n')
	if _, err := s.file.Write(buf); err != nil {
		return err
	}
	return s.file.Sync()
}

func (s *fileSink) close() error { return s.file.Close() }

// Webhook delivery bounds, read when a sink is created.
var (
	webhookTimeout  = webhook.DefaultRetry.Timeout
	webhookAttempts = webhook.DefaultRetry.Attempts
	backoffBase     = webhook.DefaultRetry.Base
	backoffMax      = webhook.DefaultRetry.Max
)

// webhookSink POSTs each record, signed, retrying with exponential backoff
// and full jitter. It runs on the sink's own goroutine, so retries delay
// only later records, never a response.
type webhookSink struct {
	poster *webhook.Poster
}

func newWebhook(url, secret string) *webhookSink {
	r := webhook.Retry{Attempts: webhookAttempts, Base: backoffBase, Max: backoffMax, Timeout: webhookTimeout}
	return &webhookSink{poster: webhook.New(url, secret, r)}
}

func (s *webhookSink) name() string { return "webhook" }

// Sign returns the X-Toolgate-Signature value for body.
func Sign(secret, body []byte) string { return signature.Sign(secret, body) }

func (s *webhookSink) write(line []byte) error { return s.poster.Deliver(line) }

func (s *webhookSink) post(line []byte) error { return s.poster.Post(line) }

// close gives queued records a moment to go out, then abandons retries.
func (s *webhookSink) close() error {
	s.poster.Close()
	return nil
}
