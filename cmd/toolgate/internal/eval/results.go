package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// Decisions and outcomes as a Result spells them. Decision values other
// than DecisionInvalid are recovery's own (substitute, escalate).
const (
	// DecisionInvalid: the answer was not a usable decision at all.
	DecisionInvalid = "invalid"
	// OutcomeSubstituted: at threshold 0 serve would have run the substitute.
	OutcomeSubstituted = "substituted"
	// OutcomeEscalated: the model chose to escalate.
	OutcomeEscalated = "escalated"
)

// CaseResult is what one case measured: one line of the results file.
type CaseResult struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Expected string `json:"expected"`
	// Key identifies the request, prompt, model and catalog the result was
	// measured with; a result whose key no longer matches its case is
	// measured again instead of being reused.
	Key string `json:"key"`
	// Decision is substitute, escalate or invalid; empty after an error.
	Decision string `json:"decision,omitempty"`
	// Confidence is the decision's own, absent for an invalid answer.
	Confidence *float64 `json:"confidence"`
	// Tool is the substitute's tool, for a substitute decision.
	Tool string `json:"tool,omitempty"`
	// Valid is set when the substitute passed every check of its tool.
	Valid bool `json:"valid"`
	// Correct is set when the substitute's tool is the expected one, by the
	// label at the time of the run; reports use the current label.
	Correct bool `json:"correct"`
	// Outcome is what the ladder made of the decision at threshold 0:
	// substituted, escalated, invalid_decision or confirmation_required.
	Outcome string `json:"outcome,omitempty"`
	// Reason is the escalation's reason, when the ladder escalated.
	Reason string `json:"reason,omitempty"`
	// LatencyMS is the re-query's round trip (the last attempt's).
	LatencyMS    float64 `json:"latency_ms"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	// Retries counts the retries after retryable upstream answers.
	Retries int `json:"retries"`
	// Error is set when no decision could be measured; such a result is
	// left out of the rates and run again on resume.
	Error          string    `json:"error,omitempty"`
	Model          string    `json:"model"`
	CatalogVersion string    `json:"catalog_version"`
	Time           time.Time `json:"time"`
}

// substitutedAt reports whether serve would have run the substitute with
// recovery.confidence_threshold = t: it passed every check at 0, and the
// ladder's only other test is confidence >= threshold.
func (r *CaseResult) substitutedAt(t float64) bool {
	return r.Error == "" && r.Outcome == OutcomeSubstituted && r.Confidence != nil && *r.Confidence >= t
}

// store keeps the latest result per case and appends new ones to the
// results file as they come.
type store struct {
	mu   sync.Mutex
	file *os.File
	rows map[string]CaseResult
	// needNL is set when the file ends in a complete line without a
	// newline, so the next append starts a line of its own.
	needNL bool
	// skipped counts lines that could not be read.
	skipped int
}

// openStore reads the results file at path, if any, and opens it for
// appending. A last line cut off by a crash is dropped from the file,
// since appending after it would corrupt the next record too. An empty
// path keeps results in memory only.
func openStore(path string) (*store, error) {
	s := &store{rows: map[string]CaseResult{}}
	if path == "" {
		return s, nil
	}
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	keep := len(data)
	for start := 0; start < len(data); {
		end := bytes.IndexByte(data[start:], '\n')
		last := end < 0
		if last {
			end = len(data)
		} else {
			end += start
		}
		line := bytes.TrimSpace(data[start:end])
		if len(line) > 0 {
			var r CaseResult
			if err := json.Unmarshal(line, &r); err != nil || r.ID == "" {
				if last {
					keep = start
				} else {
					s.skipped++
				}
			} else {
				s.rows[r.ID] = r
				s.needNL = last
			}
		}
		start = end + 1
	}
	// Results carry conversation-derived text (arguments, reasons), so
	// the file is private like the escalation sink's.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if keep < len(data) {
		if err := f.Truncate(int64(keep)); err != nil {
			f.Close()
			return nil, err
		}
	}
	if _, err := f.Seek(0, 2); err != nil {
		f.Close()
		return nil, err
	}
	s.file = f
	return s, nil
}

// get returns the latest result of a case.
func (s *store) get(id string) (CaseResult, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id]
	return r, ok
}

// add records r, writing it out as one line.
func (s *store) add(r CaseResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[r.ID] = r
	if s.file == nil {
		return nil
	}
	b, err := jsonx.Marshal(r)
	if err != nil {
		return err
	}
	line := make([]byte, 0, len(b)+2)
	if s.needNL {
		line = append(line, '\n')
		s.needNL = false
	}
	line = append(append(line, b...), '\n')
	if _, err := s.file.Write(line); err != nil {
		return fmt.Errorf("writing the results file: %w", err)
	}
	return nil
}

func (s *store) close() error {
	if s.file == nil {
		return nil
	}
	err := s.file.Sync()
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	return err
}
