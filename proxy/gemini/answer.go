package gemini

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
)

// usageOf reads usageMetadata, which may be absent.
func usageOf(raw []byte) (neutral.Usage, error) {
	if jsonx.IsNull(raw) {
		return neutral.Usage{}, nil
	}
	var w wireUsage
	if err := json.Unmarshal(raw, &w); err != nil {
		return neutral.Usage{}, err
	}
	return w.usage(), nil
}

// Finish reasons by number, as an answer asked for with
// enum-encoding=int writes them (the legacy Go SDK does). The two APIs
// number them differently.
var (
	finishReasons = []string{
		"FINISH_REASON_UNSPECIFIED", "STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER",
		"LANGUAGE", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL",
		"IMAGE_SAFETY", "UNEXPECTED_TOOL_CALL",
	}
	vertexFinishReasons = []string{
		"FINISH_REASON_UNSPECIFIED", "STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER",
		"BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "MALFORMED_FUNCTION_CALL", "MODEL_ARMOR",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "IMAGE_OTHER",
		"UNEXPECTED_TOOL_CALL", "NO_IMAGE",
	}
)

// finishReason is a candidate's finishReason by name, whether sent as its
// name or its number; "" when absent.
func (c *codec) finishReason(raw []byte) string { return finishName(raw, c.vertex()) }

// finishName is finishReason with the numbering of Vertex AI or not.
func finishName(raw []byte, vertex bool) string {
	if jsonx.IsNull(raw) {
		return ""
	}
	if vertex {
		return enumName(raw, vertexFinishReasons)
	}
	return enumName(raw, finishReasons)
}

// vertex reports a Vertex AI path (…/publishers/google/models/…), whose
// enums are numbered as Vertex numbers them.
func (c *codec) vertex() bool { return strings.Contains(c.path, "/publishers/") }

// usage counts what the provider bills: the prompt (which already includes
// cachedContentTokenCount) and tool-use prompt as input, the candidates and
// the thoughts as output.
func (u *wireUsage) usage() neutral.Usage {
	if u == nil {
		return neutral.Usage{}
	}
	return neutral.Usage{Input: u.PromptTokenCount + u.ToolUsePromptTokenCount, Output: u.CandidatesTokenCount + u.ThoughtsTokenCount}
}

// turn is a candidate's content as the codec keeps it: the content object
// replayed byte for byte in a re-query (every part, thought parts and
// thoughtSignature included), and its finish reason.
type turn struct {
	content []byte
	finish  string
}

// syntheticID prefixes the id a call is given when the model sent none.
// The pipeline matches replies to calls by id; on the wire such a call is
// answered by name and position, and the id is never written.
const syntheticID = "toolgate-call-"

// callsOf reads the parts of one candidate: its calls, numbered from
// first, and its visible text. Thought parts are the model's reasoning,
// not text for the user.
func callsOf(parts [][]byte, first int, t *neutral.Turn, text *[]byte) error {
	for _, raw := range parts {
		p, err := jsonx.ParseObject(raw)
		if err != nil {
			return fmt.Errorf("%w: a part is not an object", ErrShape)
		}
		if fc := get(p, "functionCall"); fc != nil {
			c, err := callOf(fc, first+len(t.Calls))
			if err != nil {
				return err
			}
			t.Calls = append(t.Calls, c)
			continue
		}
		if string(p.Get("thought")) == "true" {
			continue
		}
		if s, ok := jsonx.Unquote(p.Get("text")); ok {
			*text = append(*text, s...)
		}
	}
	return nil
}

// callOf is one functionCall in neutral form. Args are the object exactly
// as sent; absent args are an empty object, as the SDKs hand it over.
func callOf(raw []byte, pos int) (neutral.ToolCall, error) {
	fc, err := jsonx.ParseObject(raw)
	if err != nil {
		return neutral.ToolCall{}, fmt.Errorf("%w: functionCall is not an object", ErrShape)
	}
	name, ok := jsonx.Unquote(fc.Get("name"))
	if !ok {
		return neutral.ToolCall{}, fmt.Errorf("%w: functionCall without a name", ErrShape)
	}
	c := neutral.ToolCall{Name: name, Args: fc.Get("args"), Kind: neutral.Function}
	if jsonx.IsNull(c.Args) {
		c.Args = []byte("{}")
	} else if c.Args[0] != '{' {
		c.BadShape = true
	}
	if id, ok := jsonx.Unquote(fc.Get("id")); ok && id != "" {
		c.ID = id
	} else {
		c.ID = syntheticID + strconv.Itoa(pos)
	}
	return c, nil
}

// DecodeAnswer implements api.Codec: one turn per candidate.
func (c *codec) DecodeAnswer(body []byte) (*neutral.Answer, error) {
	if err := api.Readable(body, foldedKey); err != nil {
		return nil, err
	}
	obj, err := jsonx.ParseObject(body)
	if err != nil {
		return nil, err
	}
	if !obj.Has("candidates") && !has(obj, "promptFeedback") && !has(obj, "usageMetadata") {
		return nil, ErrShape
	}
	usage, err := usageOf(get(obj, "usageMetadata"))
	if err != nil {
		return nil, err
	}
	responseID, _ := jsonx.Unquote(get(obj, "responseId"))
	resp := &neutral.Answer{Body: body, Usage: usage}
	cands, err := array(obj.Get("candidates"))
	if err != nil {
		return nil, fmt.Errorf("%w: candidates", ErrShape)
	}
	for _, raw := range cands {
		cand, err := jsonx.ParseObject(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: a candidate is not an object", ErrShape)
		}
		finish := c.finishReason(get(cand, "finishReason"))
		t := &neutral.Turn{ResponseID: responseID, Usage: resp.Usage, Raw: &turn{content: cand.Get("content"), finish: finish}}
		parts, err := contentParts(cand.Get("content"))
		if err != nil {
			return nil, err
		}
		whole, err := assemble(parts)
		if err != nil {
			return nil, err
		}
		t.Raw.(*turn).content = assembledContent(cand.Get("content"), parts, whole)
		parts = whole
		var text []byte
		if err := callsOf(parts, 0, t, &text); err != nil {
			return nil, err
		}
		t.Text = string(text)
		t.Stop = stopOf(finish)
		resp.Choices = append(resp.Choices, t)
	}
	return resp, nil
}

// contentParts reads the parts of a content object that may be absent (a
// candidate stopped for safety has none).
func contentParts(raw []byte) ([][]byte, error) {
	if jsonx.IsNull(raw) {
		return nil, nil
	}
	c, err := jsonx.ParseObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: content is not an object", ErrShape)
	}
	parts, err := array(c.Get("parts"))
	if err != nil {
		return nil, fmt.Errorf("%w: parts", ErrShape)
	}
	return parts, nil
}

// Notes implements api.Codec. A candidate the API ended because the model's
// call was malformed, called a tool it may not call, or called too many
// passes as the API sent it when it carries no call (the SDKs report the
// finish reason, and the client decides whether to retry); the operator
// sees the note in the request's log line and in
// toolgate_unvalidated_total. When such a candidate still carries a call
// (UNEXPECTED_TOOL_CALL keeps the undeclared one), that call is judged
// like any other and there is nothing unvalidated to note.
func (*codec) Notes(t *neutral.Turn) []string {
	if len(t.Calls) > 0 {
		return nil
	}
	if r, ok := t.Raw.(*turn); ok {
		switch r.finish {
		case "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS":
			return []string{"gemini_" + strings.ToLower(r.finish)}
		}
	}
	return nil
}
