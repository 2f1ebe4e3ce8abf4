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

// Limits that keep ParseProposal's cost proportional to a fixed budget no
// matter what the upstream returns.
const (
	// MaxProposalBytes is how much of the answer is searched for the object;
	// a genuine proposal is a few kilobytes at most.
	MaxProposalBytes = 1 << 20
	// MaxProposalDepth bounds object and array nesting, well above anything
	// a tool's arguments need and far below what would strain the decoder.
	MaxProposalDepth = 512
)

// Sentinel errors returned (wrapped) by ParseProposal, so callers can map a
// bad answer to the invalid_decision escalation without matching text.
var (
	// ErrNoJSON means the answer contains no JSON object at all.
	ErrNoJSON = errors.New("recovery: no JSON object in the answer")
	// ErrInvalidProposal means the first JSON object in the answer is
	// malformed or does not describe a consistent proposal.
	ErrInvalidProposal = errors.New("recovery: invalid decision")
)

// Proposal is the model's answer under the decision strategy, validated:
// a real tool to call in place of the bad call, or an escalation with the
// model's account of why there is none.
type Proposal struct {
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

// ParseProposal reads the model's proposal in the recovery answer text.
//
// Only the first balanced JSON object counts. Markdown fences and prose around
// it are tolerated because models add them despite being told not to, but if
// that first object is broken the answer is rejected rather than searched
// further: a later object may be a quotation or an injected fake decision,
// and picking it would let the model's prose choose the outcome.
func ParseProposal(text string) (Proposal, error) {
	if len(text) > MaxProposalBytes {
		text = text[:MaxProposalBytes]
	}
	start := strings.IndexByte(text, '{')
	if start < 0 {
		return Proposal{}, ErrNoJSON
	}
	end, err := scanBalanced(text[start:])
	if err != nil {
		return Proposal{}, err
	}
	candidate := []byte(text[start : start+end])
	if !json.Valid(candidate) {
		return Proposal{}, proposalErr("first JSON object is not valid JSON")
	}
	top, err := proposalFields(candidate)
	if err != nil {
		return Proposal{}, err
	}

	var proposal Proposal
	if proposal.Decision, err = proposalString(top, "decision"); err != nil {
		return Proposal{}, err
	}
	if proposal.Confidence, err = parseConfidence(top); err != nil {
		return Proposal{}, err
	}
	switch proposal.Decision {
	case DecisionSubstitute:
		err = readSubstitution(top, &proposal)
	case DecisionEscalate:
		err = readEscalation(top, &proposal)
	default:
		err = proposalErr(`"decision" must be "substitute" or "escalate"`)
	}
	if err != nil {
		return Proposal{}, err
	}
	return proposal, nil
}

func readSubstitution(top map[string]json.RawMessage, proposal *Proposal) error {
	if !jsonNullOrAbsent(top, "escalation") {
		return proposalErr(`a substitution must leave "escalation" null`)
	}
	raw, ok := top["corrected_tool_call"]
	if !ok || jsonIsNull(raw) {
		return proposalErr(`a substitution needs "corrected_tool_call"`)
	}
	call, err := proposalFields(raw)
	if err != nil {
		return fmt.Errorf(`%w (in "corrected_tool_call")`, err)
	}
	name, err := proposalString(call, "tool_name")
	if err != nil {
		return err
	}
	if strings.TrimSpace(name) == "" {
		return proposalErr(`"tool_name" is empty`)
	}
	args, ok := call["arguments"]
	if !ok {
		return proposalErr(`"arguments" is missing`)
	}
	compact, err := proposalArguments(args)
	if err != nil {
		return err
	}
	proposal.Tool = name
	proposal.Arguments = compact
	return nil
}

func readEscalation(top map[string]json.RawMessage, proposal *Proposal) error {
	if !jsonNullOrAbsent(top, "corrected_tool_call") {
		return proposalErr(`an escalation must leave "corrected_tool_call" null`)
	}
	raw, ok := top["escalation"]
	if !ok || jsonIsNull(raw) {
		return proposalErr(`an escalation needs "escalation"`)
	}
	esc, err := proposalFields(raw)
	if err != nil {
		return fmt.Errorf(`%w (in "escalation")`, err)
	}
	reason, err := proposalString(esc, "reason")
	if err != nil {
		return err
	}
	if strings.TrimSpace(reason) == "" {
		return proposalErr(`"reason" is empty`)
	}
	if proposal.OriginalIntent, err = proposalOptString(esc, "original_intent"); err != nil {
		return err
	}
	if proposal.MissingCapability, err = proposalOptString(esc, "missing_capability"); err != nil {
		return err
	}
	proposal.Reason = reason
	return nil
}

// proposalArguments returns the arguments as compact JSON. A JSON string holding
// an object is unwrapped because models often double-encode arguments the way
// the OpenAI wire format does; anything else that is not an object is refused,
// since no tool call can take it.
func proposalArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err != nil {
			return nil, proposalErr(`"arguments" is not a JSON object`)
		}
		raw = []byte(strings.TrimSpace(inner))
		// The unwrapped text never passed the nesting scan, so give it the
		// same bound before the decoder sees it.
		if len(raw) == 0 || raw[0] != '{' {
			return nil, proposalErr(`"arguments" is not a JSON object`)
		}
		end, err := scanBalanced(string(raw))
		if err != nil || end != len(raw) || !json.Valid(raw) {
			return nil, proposalErr(`"arguments" string does not hold a JSON object`)
		}
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, proposalErr(`"arguments" is not a JSON object`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, proposalErr(`"arguments" is not a JSON object`)
	}
	return buf.Bytes(), nil
}

// parseConfidence insists on a real JSON number: encoding/json would quietly take a
// null as zero or, for json.Number, a quoted string, and either would let an
// answer without a stated confidence pass the threshold check by accident.
func parseConfidence(fields map[string]json.RawMessage) (float64, error) {
	raw, ok := fields["confidence"]
	if !ok {
		return 0, proposalErr(`"confidence" is missing`)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, proposalErr(`"confidence" is not a number`)
	}
	c, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, proposalErr(`"confidence" is not a representable number`)
	}
	if !(c >= 0 && c <= 1) {
		return 0, proposalErr(`"confidence" is outside 0..1`)
	}
	if c == 0 {
		// Normalise -0 so it never prints as "-0" in escalation records.
		c = 0
	}
	return c, nil
}

// proposalFields splits a JSON object into its members by exact key. The
// standard decoder matches keys case-insensitively and lets a repeated key
// silently win, which would let "Decision" or a second "decision" override the
// one a reviewer reads first; both are refused here instead.
func proposalFields(raw json.RawMessage) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, proposalErr("not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, proposalErr("expected a JSON object")
	}
	fields := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, proposalErr("not valid JSON")
		}
		key, ok := tok.(string)
		if !ok {
			return nil, proposalErr("not valid JSON")
		}
		if _, dup := fields[key]; dup {
			return nil, proposalErr("a key appears more than once")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, proposalErr("not valid JSON")
		}
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, proposalErr("not valid JSON")
	}
	return fields, nil
}

func proposalString(fields map[string]json.RawMessage, key string) (string, error) {
	raw, ok := fields[key]
	if !ok {
		return "", proposalErr(strconv.Quote(key) + " is missing")
	}
	return proposalStringValue(raw, key)
}

// proposalOptString treats null like absence because models often write null for
// an escalation detail they cannot fill; a non-string is still refused.
func proposalOptString(fields map[string]json.RawMessage, key string) (string, error) {
	raw, ok := fields[key]
	if !ok || jsonIsNull(raw) {
		return "", nil
	}
	return proposalStringValue(raw, key)
}

func proposalStringValue(raw json.RawMessage, key string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", proposalErr(strconv.Quote(key) + " is not a string")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", proposalErr(strconv.Quote(key) + " is not a string")
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

func proposalErr(reason string) error {
	return fmt.Errorf("%w: %s", ErrInvalidProposal, reason)
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
			if depth > MaxProposalDepth {
				return 0, proposalErr("JSON nested too deeply")
			}
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, proposalErr("JSON object is not closed")
}
