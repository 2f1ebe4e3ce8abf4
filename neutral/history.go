package neutral

// History records the earlier tool calls of the conversation one request
// carries and the results the conversation gave them, as the wire holds
// them, in conversation order. Codecs only record; pairing calls with
// results and parsing their JSON is the checks' work, done once and only
// when a rule or validator reads the history.
type History struct {
	Calls   []PastCall
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
	Text    string
	IsError bool
}

// AddCall records an earlier call of the conversation.
func (h *History) AddCall(id, tool string, args []byte) {
	h.Calls = append(h.Calls, PastCall{ID: id, Tool: tool, Args: args})
}

// AddResult records the answer to the call with id. The first answer to an
// id counts: a later one cannot rewrite what the model was shown first.
func (h *History) AddResult(id, text string, isError bool) {
	if h.results == nil {
		h.results = map[string]PastResult{}
	}
	if _, dup := h.results[id]; !dup {
		h.results[id] = PastResult{Text: text, IsError: isError}
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
