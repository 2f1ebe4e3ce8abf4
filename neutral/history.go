package neutral

// History records the earlier tool calls of the conversation one request
// carries and the results the conversation gave them, as the wire holds
// them, in conversation order. Codecs only record; pairing calls with
// results and parsing their JSON is the checks' work, done once and only
// when a rule or validator reads the history.
type History struct {
	Calls []PastCall
	// Results is every result the conversation carries, in order, for
	// judging what the model is about to read (a repeated id included).
	Results []PastResult
	results map[string]PastResult
}

// PastCall is an earlier call of the conversation.
type PastCall struct {
	ID, Tool string
	// Args is the argument JSON text as the call carried it.
	Args []byte
}

// PastResult is the conversation's answer to an earlier call.
type PastResult struct {
	ID      string
	Text    string
	IsError bool
	// Raw is the result's JSON value as the body holds it (a slice of the
	// body or a copy of those bytes), where its strings are found and
	// replaced; nil when the codec could not say.
	Raw []byte
}

// AddCall records an earlier call of the conversation.
func (h *History) AddCall(id, tool string, args []byte) {
	h.Calls = append(h.Calls, PastCall{ID: id, Tool: tool, Args: args})
}

// AddResult records the answer to the call with id. The first answer to an
// id counts: a later one cannot rewrite what the model was shown first.
// raw is the result's JSON value in the request body (see PastResult.Raw).
func (h *History) AddResult(id, text string, isError bool, raw []byte) {
	if h.results == nil {
		h.results = map[string]PastResult{}
	}
	r := PastResult{ID: id, Text: text, IsError: isError, Raw: raw}
	h.Results = append(h.Results, r)
	if _, dup := h.results[id]; !dup {
		h.results[id] = r
	}
}

// Result is the recorded answer to the call with id.
func (h *History) Result(id string) (PastResult, bool) {
	if h == nil {
		return PastResult{}, false
	}
	r, ok := h.results[id]
	return r, ok
}
