// Package sink records every escalation outside the request path: a JSONL
// dead-letter file and a signed webhook. A sink never blocks a response: each
// has a bounded queue drained by its own goroutine, and a full queue drops
// the record and counts it.
package sink

import (
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// queueSize bounds the records waiting for each sink.
const queueSize = 1024

// Counters are the sink metrics, labelled by sink name.
type Counters struct {
	Dropped  *prometheus.CounterVec
	Failures *prometheus.CounterVec
}

// writer is one destination.
type writer interface {
	name() string
	// write delivers one encoded record; it may block and retry.
	write(line []byte) error
	close() error
}

// Set is the sinks of one config, fed from one queue each.
type Set struct {
	redact   []string
	log      *zap.Logger
	counters Counters
	queues   []chan []byte
	writers  []writer
	wg       sync.WaitGroup
}

var _ pipeline.Sink = (*Set)(nil)

// New starts the sinks the config names. secrets carries the webhook key.
func New(cfg catalog.Escalation, secrets catalog.Secrets, log *zap.Logger, c Counters) (*Set, error) {
	s := &Set{redact: cfg.Redact, log: log, counters: c}
	if cfg.Sinks.File != "" {
		f, err := openFile(cfg.Sinks.File)
		if err != nil {
			return nil, err
		}
		s.add(f)
	}
	if cfg.Sinks.Webhook != "" {
		s.add(newWebhook(cfg.Sinks.Webhook, secrets.WebhookSecret))
	}
	return s, nil
}

func (s *Set) add(w writer) {
	q := make(chan []byte, queueSize)
	s.queues = append(s.queues, q)
	s.writers = append(s.writers, w)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for line := range q {
			if err := w.write(line); err != nil {
				s.counters.Failures.WithLabelValues(w.name()).Inc()
				s.log.Warn("escalation sink failed; record lost", zap.String("sink", w.name()), zap.Error(err))
			}
		}
	}()
}

// Record implements pipeline.Sink. It redacts and encodes the record once and
// queues it for every sink without waiting.
func (s *Set) Record(rec *pipeline.EscalationRecord) {
	if len(s.writers) == 0 {
		return
	}
	line, err := Encode(rec, s.redact)
	if err != nil {
		s.log.Error("escalation record could not be encoded", zap.Error(err))
		return
	}
	for i, q := range s.queues {
		select {
		case q <- line:
		default:
			s.counters.Dropped.WithLabelValues(s.writers[i].name()).Inc()
		}
	}
}

// drainWait is how long Close lets queued records go out before it
// abandons retries.
var drainWait = 5 * time.Second

// Close stops accepting records, gives the queues a moment to drain and
// closes the sinks. Records still waiting on a dead webhook after that are
// lost, and counted as failures.
func (s *Set) Close() {
	for _, q := range s.queues {
		close(q)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainWait):
		for _, w := range s.writers {
			_ = w.close()
		}
		<-done
	}
	for _, w := range s.writers {
		_ = w.close()
	}
}

// Encode turns a record into one JSON line with the redacted pointers
// blanked in every set of arguments it carries. Validators' own words
// (Finding.Reason) are dropped: they may quote the operator's data, and a
// record outlives the request.
func Encode(rec *pipeline.EscalationRecord, redact []string) ([]byte, error) {
	if rec.Escalation != nil && (len(redact) > 0 || hasReasons(rec.Escalation)) {
		e := *rec.Escalation
		e.Attempts = make([]recovery.Attempt, len(rec.Escalation.Attempts))
		for i, a := range rec.Escalation.Attempts {
			if len(redact) > 0 && (a.Arguments != nil || a.ArgumentsRaw != nil) {
				a.Arguments, a.ArgumentsRaw = redactArgs(a.Arguments, a.ArgumentsRaw, redact)
			}
			a.Findings = withoutReasons(a.Findings)
			e.Attempts[i] = a
		}
		if e.Call != nil && len(redact) > 0 {
			e.Call = redactCall(e.Call, redact)
		}
		r := *rec
		r.Escalation = &e
		rec = &r
	}
	return jsonx.Marshal(rec)
}

func hasReasons(e *recovery.Escalation) bool {
	if e == nil {
		return false
	}
	for _, a := range e.Attempts {
		for _, f := range a.Findings {
			if f.Reason != "" {
				return true
			}
		}
	}
	return false
}

// withoutReasons copies fs with every Reason cleared.
func withoutReasons(fs []validate.Finding) []validate.Finding {
	if fs == nil {
		return nil
	}
	out := make([]validate.Finding, len(fs))
	for i, f := range fs {
		f.Reason = ""
		out[i] = f
	}
	return out
}

const redacted = "[redacted]"

// redactArgs blanks the pointers in parsed arguments and rebuilds the raw
// text from them. Raw text that is not an object cannot be redacted by
// pointer, so it is withheld whole.
func redactArgs(args json.RawMessage, raw *string, pointers []string) (json.RawMessage, *string) {
	if args == nil {
		if raw == nil {
			return nil, nil
		}
		s := redacted
		return nil, &s
	}
	var v any
	if json.Unmarshal(args, &v) != nil {
		s := redacted
		return nil, &s
	}
	for _, p := range pointers {
		redactPointer(v, p)
	}
	b, err := jsonx.Marshal(v)
	if err != nil {
		s := redacted
		return nil, &s
	}
	s := string(b)
	return b, &s
}

// redactCall blanks pointers inside a call in any route shape: the
// arguments live under function.arguments (a JSON string), input, or
// arguments.
func redactCall(call json.RawMessage, pointers []string) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(call, &m) != nil {
		return json.RawMessage(`null`)
	}
	fix := func(holder map[string]any, key string) {
		switch a := holder[key].(type) {
		case string:
			var v any
			if json.Unmarshal([]byte(a), &v) != nil {
				holder[key] = redacted
				return
			}
			for _, p := range pointers {
				redactPointer(v, p)
			}
			b, _ := jsonx.Marshal(v)
			holder[key] = string(b)
		case map[string]any:
			for _, p := range pointers {
				redactPointer(a, p)
			}
		}
	}
	if fn, ok := m["function"].(map[string]any); ok {
		fix(fn, "arguments")
	}
	fix(m, "input")
	fix(m, "arguments")
	b, _ := jsonx.Marshal(m)
	return b
}

// redactPointer replaces the value at pointer p with the redaction marker.
func redactPointer(v any, p string) {
	if p == "" || p[0] != '/' {
		return
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		last := i == len(toks)-1
		switch cur := v.(type) {
		case map[string]any:
			next, ok := cur[t]
			if !ok {
				return
			}
			if last {
				cur[t] = redacted
				return
			}
			v = next
		case []any:
			idx := -1
			if n, err := json.Number(t).Int64(); err == nil {
				idx = int(n)
			}
			if idx < 0 || idx >= len(cur) {
				return
			}
			if last {
				cur[idx] = redacted
				return
			}
			v = cur[idx]
		default:
			return
		}
	}
}

// RedactArgs blanks the pointers in a call's JSON arguments, as records
// are redacted; arguments that are not JSON are withheld whole. The
// approvals admin API shows arguments through it.
func RedactArgs(args json.RawMessage, pointers []string) json.RawMessage {
	if len(pointers) == 0 {
		return args
	}
	out, _ := redactArgs(args, nil, pointers)
	if out == nil {
		return json.RawMessage(`"` + redacted + `"`)
	}
	return out
}
