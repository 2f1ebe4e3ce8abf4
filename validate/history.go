package validate

import (
	"bytes"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
)

// History is the earlier tool calls of the conversation one request
// carries, each paired with its result by call id. Adapters record the wire
// pieces in conversation order with AddCall and AddResult; the pairing and
// parsing happen once, on first use, since most requests have no rule or
// validator that reads the history.
//
// Every API's adapter fills it the same way, so rules and validators see
// one shape whatever the wire format was.
type History struct {
	calls   []pastCall
	results map[string]pastResult

	once    sync.Once
	entries []HistoryEntry
	cel     any
}

type pastCall struct {
	id, tool string
	args     []byte
}

type pastResult struct {
	text    string
	isError bool
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

// AddCall records an earlier call of the conversation. args is the
// argument JSON text as the call carried it.
func (h *History) AddCall(id, tool string, args []byte) {
	h.calls = append(h.calls, pastCall{id: id, tool: tool, args: args})
}

// AddResult records the answer to the call with id. The first answer to an
// id counts: a later one cannot rewrite what the model was shown first. An
// answer to an id no call carries pairs with nothing and is left out, as
// it says nothing about which tool returned it.
func (h *History) AddResult(id, text string, isError bool) {
	if h.results == nil {
		h.results = map[string]pastResult{}
	}
	if _, dup := h.results[id]; !dup {
		h.results[id] = pastResult{text: text, isError: isError}
	}
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
	h.entries = make([]HistoryEntry, 0, len(h.calls))
	vals := make([]any, 0, len(h.calls))
	for _, c := range h.calls {
		e := HistoryEntry{ID: c.id, Tool: c.tool, Args: parseLoose(c.args)}
		if r, ok := h.results[c.id]; ok && c.id != "" {
			e.Result, e.IsError = parseLoose([]byte(r.text)), r.isError
		}
		h.entries = append(h.entries, e)
		vals = append(vals, map[string]any{
			"id": e.ID, "tool": e.Tool, "args": e.Args, "result": e.Result, "is_error": e.IsError,
		})
	}
	h.cel = catalog.CELList(vals)
	h.calls, h.results = nil, nil
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
