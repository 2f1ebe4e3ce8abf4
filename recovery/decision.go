package recovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The two outcomes a recovery answer may choose; any other value is invalid.
const (
	// DecisionSubstitute means the model mapped the call onto a real tool.
	DecisionSubstitute = "substitute"
	// DecisionEscalate means the model found no safe substitute.
	DecisionEscalate = "escalate"
)

// Limits that keep ParseDecision's cost proportional to a fixed budget no
// matter what the upstream returns.
const (
	// MaxDecisionBytes is how much of the answer is searched for the object;
	// a genuine decision is a few kilobytes at most.
	MaxDecisionBytes = 1 << 20
	// MaxDecisionDepth bounds object and array nesting, well above anything
	// a tool's arguments need and far below what would strain the decoder.
	MaxDecisionDepth = 512
)

// Sentinel errors returned (wrapped) by ParseDecision, so callers can map a
// bad answer to the invalid_decision escalation without matching text.
var (
	// ErrNoJSON means the answer contains no JSON object at all.
	ErrNoJSON = errors.New("recovery: no JSON object in the answer")
	// ErrInvalidDecision means the first JSON object in the answer is
	// malformed or does not describe a consistent decision.
	ErrInvalidDecision = errors.New("recovery: invalid decision")
)

// Decision is a validated recovery answer.
type Decision struct {
	// Decision is DecisionSubstitute or DecisionEscalate.
	Decision string
	// Tool is the real tool to call instead; set only for a substitution.
	Tool string
	// Arguments is the compact JSON object to call Tool with; set only for
	// a substitution, and still unchecked against the tool's schema.
	Arguments json.RawMessage
	// Reason explains an escalation; always non-empty for one.
	Reason string
	// OriginalIntent is the model's account of what the failed call was for.
	OriginalIntent string
	// MissingCapability names what no available tool could do.
	MissingCapability string
	// Confidence is the model's self-reported certainty, within [0, 1].
	Confidence float64
}

// ParseDecision reads the recovery answer in text.
//
// Only the first balanced JSON object counts. Markdown fences and prose around
// it are tolerated because models add them despite being told not to, but if
// that first object is broken the answer is rejected rather than searched
// further: a later object may be a quotation or an injected fake decision,
// and picking it would let the model's prose choose the outcome.
func ParseDecision(text string) (Decision, error) {
	if len(text) > MaxDecisionBytes {
		text = text[:MaxDecisionBytes]
	}
	start := strings.IndexByte(text, '{')
	if start < 0 {
		return Decision{}, ErrNoJSON
	}
	end, err := scanBalanced(text[start:])
	if err != nil {
		return Decision{}, err
	}
	candidate := []byte(text[start : start+end])
	if !json.Valid(candidate) {
		return Decision{}, decisionErr("first JSON object is not valid JSON")
	}
	top, err := decisionFields(candidate)
	if err != nil {
		return Decision{}, err
	}

	var d Decision
	if d.Decision, err = decisionString(top, "decision"); err != nil {
		return Decision{}, err
	}
	if d.Confidence, err = parseConfidence(top); err != nil {
		return Decision{}, err
	}
	switch d.Decision {
	case DecisionSubstitute:
		err = readSubstituteDecision(top, &d)
	case DecisionEscalate:
		err = readEscalateDecision(top, &d)
	default:
		err = decisionErr(`"decision" must be "substitute" or "escalate"`)
	}
	if err != nil {
		return Decision{}, err
	}
	return d, nil
}

func readSubstituteDecision(top map[string]json.RawMessage, d *Decision) error {
	if !jsonNullOrAbsent(top, "escalation") {
		return decisionErr(`a substitution must leave "escalation" null`)
	}
	raw, ok := top["corrected_tool_call"]
	if !ok || jsonIsNull(raw) {
		return decisionErr(`a substitution needs "corrected_tool_call"`)
	}
	call, err := decisionFields(raw)
	if err != nil {
		return fmt.Errorf(`%w (in "corrected_tool_call")`, err)
	}
	name, err := decisionString(call, "tool_name")
	if err != nil {
		return err
	}
	if strings.TrimSpace(name) == "" {
		return decisionErr(`"tool_name" is empty`)
	}
	args, ok := call["arguments"]
	if !ok {
		return decisionErr(`"arguments" is missing`)
	}
	compact, err := decisionArguments(args)
	if err != nil {
		return err
	}
	d.Tool = name
	d.Arguments = compact
	return nil
}

func readEscalateDecision(top map[string]json.RawMessage, d *Decision) error {
	if !jsonNullOrAbsent(top, "corrected_tool_call") {
		return decisionErr(`an escalation must leave "corrected_tool_call" null`)
	}
	raw, ok := top["escalation"]
	if !ok || jsonIsNull(raw) {
		return decisionErr(`an escalation needs "escalation"`)
	}
	esc, err := decisionFields(raw)
	if err != nil {
		return fmt.Errorf(`%w (in "escalation")`, err)
	}
	reason, err := decisionString(esc, "reason")
	if err != nil {
		return err
	}
	if strings.TrimSpace(reason) == "" {
		return decisionErr(`"reason" is empty`)
	}
	if d.OriginalIntent, err = decisionOptString(esc, "original_intent"); err != nil {
		return err
	}
	if d.MissingCapability, err = decisionOptString(esc, "missing_capability"); err != nil {
		return err
	}
	d.Reason = reason
	return nil
}

// decisionArguments returns the arguments as compact JSON. A JSON string holding
// an object is unwrapped because models often double-encode arguments the way
// the OpenAI wire format does; anything else that is not an object is refused,
// since no tool call can take it.
func decisionArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err != nil {
			return nil, decisionErr(`"arguments" is not a JSON object`)
		}
		raw = []byte(strings.TrimSpace(inner))
		// The unwrapped text never passed the nesting scan, so give it the
		// same bound before the decoder sees it.
		if len(raw) == 0 || raw[0] != '{' {
			return nil, decisionErr(`"arguments" is not a JSON object`)
		}
		end, err := scanBalanced(string(raw))
		if err != nil || end != len(raw) || !json.Valid(raw) {
			return nil, decisionErr(`"arguments" string does not hold a JSON object`)
		}
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, decisionErr(`"arguments" is not a JSON object`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, decisionErr(`"arguments" is not a JSON object`)
	}
	return buf.Bytes(), nil
}

// parseConfidence insists on a real JSON number: encoding/json would quietly take a
// null as zero or, for json.Number, a quoted string, and either would let an
// answer without a stated confidence pass the threshold check by accident.
func parseConfidence(fields map[string]json.RawMessage) (float64, error) {
	raw, ok := fields["confidence"]
	if !ok {
		return 0, decisionErr(`"confidence" is missing`)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, decisionErr(`"confidence" is not a number`)
	}
	c, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, decisionErr(`"confidence" is not a representable number`)
	}
	if !(c >= 0 && c <= 1) {
		return 0, decisionErr(`"confidence" is outside 0..1`)
	}
	if c == 0 {
		// Normalise -0 so it never prints as "-0" in escalation records.
		c = 0
	}
	return c, nil
}

// decisionFields splits a JSON object into its members by exact key. The
// standard decoder matches keys case-insensitively and lets a repeated key
// silently win, which would let "Decision" or a second "decision" override the
// one a reviewer reads first; both are refused here instead.
func decisionFields(raw json.RawMessage) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, decisionErr("not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, decisionErr("expected a JSON object")
	}
	fields := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, decisionErr("not valid JSON")
		}
		key, ok := tok.(string)
		if !ok {
			return nil, decisionErr("not valid JSON")
		}
		if _, dup := fields[key]; dup {
			return nil, decisionErr("a key appears more than once")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, decisionErr("not valid JSON")
		}
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, decisionErr("not valid JSON")
	}
	return fields, nil
}

func decisionString(fields map[string]json.RawMessage, key string) (string, error) {
	raw, ok := fields[key]
	if !ok {
		return "", decisionErr(strconv.Quote(key) + " is missing")
	}
	return decisionStringValue(raw, key)
}

// decisionOptString treats null like absence because models often write null for
// an escalation detail they cannot fill; a non-string is still refused.
func decisionOptString(fields map[string]json.RawMessage, key string) (string, error) {
	raw, ok := fields[key]
	if !ok || jsonIsNull(raw) {
		return "", nil
	}
	return decisionStringValue(raw, key)
}

func decisionStringValue(raw json.RawMessage, key string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", decisionErr(strconv.Quote(key) + " is not a string")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", decisionErr(strconv.Quote(key) + " is not a string")
	}
	return s, nil
}

func jsonIsNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

func jsonNullOrAbsent(fields map[string]json.RawMessage, key string) bool {
	raw, ok := fields[key]
	return !ok || jsonIsNull(raw)
}

func decisionErr(reason string) error {
	return fmt.Errorf("%w: %s", ErrInvalidDecision, reason)
}

// scanBalanced returns the length of the balanced object or array at the start of
// s. It only tracks nesting and string boundaries, so braces inside strings do
// not count; whether the text is actually valid JSON is left to the decoder.
// Brackets of both kinds share one depth counter: for valid JSON that ends the
// scan at the right byte, and any mismatch is caught by the decoder anyway.
func scanBalanced(s string) (int, error) {
	depth := 0
	inString := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > MaxDecisionDepth {
				return 0, decisionErr("JSON nested too deeply")
			}
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, decisionErr("JSON object is not closed")
}
