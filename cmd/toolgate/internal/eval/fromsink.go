package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/validate"
)

// KindProduction is the kind of cases taken from the escalation sink.
const KindProduction = "production"

// SinkStats says what CasesFromSink made of its input.
type SinkStats struct {
	// Records read, and those turned into cases.
	Records int
	Cases   int
	// NotInvented are escalations with no call to an unknown tool (a bad
	// argument, a confirm tool…): nothing for recovery to measure.
	NotInvented int
	// Unreadable lines, with why.
	Unreadable []string
	// WithoutIntent are cases whose record had no original_intent, so they
	// have no messages yet.
	WithoutIntent int
}

// CasesFromSink turns escalation records from the file sink into cases to
// label. The bad call is the first "call" attempt with an unknown_tool
// finding; expected is left empty for a person to fill in. The record holds
// no conversation, so the escalation's original_intent (the model's own
// account of what the user wanted) becomes a single user message; without
// one, messages stay empty and the case must be completed by hand. Tools
// are left out: the record does not say which the request offered, so the
// case is measured against the config catalog.
func CasesFromSink(r io.Reader) ([]Case, SinkStats, error) {
	var st SinkStats
	var out []Case
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	line := 0
	seen := map[string]bool{}
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var rec pipeline.EscalationRecord
		if err := json.Unmarshal(text, &rec); err != nil || rec.Escalation == nil {
			why := "not an escalation record"
			if err != nil {
				why = err.Error()
			}
			st.Unreadable = append(st.Unreadable, fmt.Sprintf("line %d: %s", line, why))
			continue
		}
		st.Records++
		e := rec.Escalation
		c, ok := caseFromEscalation(&rec)
		if !ok {
			st.NotInvented++
			continue
		}
		if c.ID == "" || seen[c.ID] {
			// Ids keep cases apart in results files; a record without one
			// (or a repeated one) gets its line number instead.
			c.ID = fmt.Sprintf("sink-line-%d", line)
		}
		seen[c.ID] = true
		if strings.TrimSpace(e.OriginalIntent) == "" {
			st.WithoutIntent++
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, st, err
	}
	st.Cases = len(out)
	return out, st, nil
}

func caseFromEscalation(rec *pipeline.EscalationRecord) (Case, bool) {
	e := rec.Escalation
	for _, a := range e.Attempts {
		if a.Kind != "call" || !hasCode(a.Findings, validate.UnknownTool) {
			continue
		}
		args := json.RawMessage(a.Arguments)
		if len(args) == 0 {
			// Arguments that were not a JSON object survive only as text;
			// the case format takes that as a JSON string.
			raw := ""
			if a.ArgumentsRaw != nil {
				raw = *a.ArgumentsRaw
			}
			args = jsonx.String(raw)
		}
		c := Case{
			ID:       e.ID,
			Kind:     KindProduction,
			Messages: []json.RawMessage{},
			BadCall:  BadCall{Name: a.Tool, Arguments: args},
			Note:     sinkNote(rec),
		}
		if intent := strings.TrimSpace(e.OriginalIntent); intent != "" {
			msg := jsonx.Object{
				{Key: "role", Value: jsonx.String("user")},
				{Key: "content", Value: jsonx.String(intent)},
			}
			c.Messages = []json.RawMessage{msg.Bytes()}
		}
		return c, true
	}
	return Case{}, false
}

// sinkNote tells the labeller where a case came from.
func sinkNote(rec *pipeline.EscalationRecord) string {
	e := rec.Escalation
	parts := []string{"from escalation " + e.ID}
	if !rec.Time.IsZero() {
		parts = append(parts, "at "+rec.Time.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if rec.Model != "" {
		parts = append(parts, "model "+rec.Model)
	}
	if e.CatalogVersion != "" {
		parts = append(parts, "catalog "+e.CatalogVersion)
	}
	s := strings.Join(parts, ", ")
	if e.Reason != "" {
		s += "; escalated because: " + e.Reason
	}
	if e.MissingCapability != "" {
		s += "; missing capability: " + e.MissingCapability
	}
	return s
}

func hasCode(fs []validate.Finding, c validate.Code) bool {
	for _, f := range fs {
		if f.Code == c {
			return true
		}
	}
	return false
}
