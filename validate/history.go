package validate

import (
	"bytes"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// History is the earlier tool calls of the conversation one request
// carries, each paired with its result by call id. Codecs record the wire
// pieces in conversation order (neutral.History); the pairing and
// parsing happen once, on first use, since most requests have no rule or
// validator that reads the history.
//
// Every API's codec fills it the same way, so rules and validators see
// one shape whatever the wire format was.
type History struct {
	// History is the record as the codec made it.
	neutral.History

	once    sync.Once
	entries []HistoryEntry
	cel     any
}

// HistoryOf views a codec's record for the checks; nil stays nil.
func HistoryOf(rec *neutral.History) *History {
	if rec == nil {
		return nil
	}
	return &History{History: *rec}
}

// HistoryEntry is one earlier call as rules (`history`) and validators
// (the "history" field) see it.
type HistoryEntry struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Args is the parsed argument JSON, or its text when it is not JSON.
	Args any `json:"args"`
	// Result is the tool's answer parsed as JSON when it is JSON, else its
	// text; nil when the conversation holds no answer to the call.
	Result  any  `json:"result"`
	IsError bool `json:"is_error"`
}

// Entries returns the earlier calls, oldest first. The slice is shared and
// must not be changed.
func (h *History) Entries() []HistoryEntry {
	if h == nil {
		return nil
	}
	h.once.Do(h.build)
	return h.entries
}

// celEntries returns the entries as one CEL list, built once per request.
func (h *History) celEntries() any {
	if h == nil {
		return nil
	}
	h.once.Do(h.build)
	return h.cel
}

func (h *History) build() {
	h.entries = make([]HistoryEntry, 0, len(h.Calls))
	vals := make([]any, 0, len(h.Calls))
	for _, c := range h.Calls {
		e := HistoryEntry{ID: c.ID, Tool: c.Tool, Args: parseLoose(c.Args)}
		if r, ok := h.Result(c.ID); ok && c.ID != "" {
			e.Result, e.IsError = parseLoose([]byte(r.Text)), r.IsError
		}
		h.entries = append(h.entries, e)
		vals = append(vals, map[string]any{
			"id": e.ID, "tool": e.Tool, "args": e.Args, "result": e.Result, "is_error": e.IsError,
		})
	}
	h.cel = catalog.CELList(vals)
	h.History = neutral.History{}
}

// parseLoose reads text as JSON when it is JSON (numbers kept exact) and
// returns it as a string otherwise: a tool may answer "not found" as well
// as an object.
func parseLoose(b []byte) any {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || !utf8.Valid(t) {
		return string(b)
	}
	if v, ok := jsonx.Decode(t); ok {
		return v
	}
	if v, err := jsonschema.UnmarshalJSON(bytes.NewReader(t)); err == nil {
		return v
	}
	return string(b)
}
