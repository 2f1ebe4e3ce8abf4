package neutral

// Request is what the pipeline needs to know about a client request.
type Request struct {
	// Body is the request exactly as the client sent it, or as toolgate
	// sent it upstream once it offered an extra tool.
	Body    []byte
	Model   string
	Stream  bool
	Offered []Offered
	Choice  ToolChoice
	// StructuredOutput is set when the request asks for response_format /
	// text.format: escalations then always use error mode.
	StructuredOutput bool
	// HistoryUpstream is set when earlier turns live at the provider.
	HistoryUpstream bool
	// Stateful is set when a re-query cannot extend the conversation.
	Stateful bool
	// StoresAnswers is set when the provider keeps each answer for the
	// client to continue from by its id (Responses unless store: false).
	// A call toolgate writes itself has no stored twin there, so a repair
	// must come from the model (docs/apis.md, "Responses: ids after a
	// repair").
	StoresAnswers bool
	// Vouching are the texts that may vouch for identifiers: what the user
	// wrote and what tools returned, never what the assistant said.
	Vouching []string
	// History is the conversation's earlier tool calls and their results.
	History *History
	// UserText is the last user message, for shortlist ranking.
	UserText string
}

// Answer is a decoded non-streaming answer.
type Answer struct {
	Body []byte
	// Choices are the answer's assistant turns (one unless n > 1).
	Choices []*Turn
	Usage   Usage
}

// AddUserTurn records what one turn of the user's side vouches for: the
// person's own text and the tool results the turn carries. The person's
// latest words rank the shortlist, so UserText follows the last turn that
// has any; a turn of only tool results says nothing new about the intent.
func (r *Request) AddUserTurn(own string, results []string) {
	r.Vouching = append(r.Vouching, own)
	r.Vouching = append(r.Vouching, results...)
	if own != "" {
		r.UserText = own
	}
}
