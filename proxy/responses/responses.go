// Package responses is the codec of the OpenAI Responses API
// (POST /v1/responses): it reads requests and answers into neutral values,
// writes re-queries in the shapes the provider accepts (a stateless replay
// of the output items, or a chain on the bad response's id when the
// conversation is stored upstream), and writes the client's answer by
// splicing only what changed into the upstream's own bytes.
package responses

import (
	"errors"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaiwire"
)

// API is the Responses wire format. It is stateless and shared.
type API struct{}

var _ api.API = API{}

// Name implements api.API.
func (API) Name() string { return "responses" }

// NewCodec implements api.API.
func (API) NewCodec() api.Codec { return &codec{} }

// codec translates one request's exchange.
type codec struct {
	// body is the request as sent upstream: the client's, or with the
	// tool InjectTool appended. Re-queries start from it.
	body []byte
	info requestInfo
}

var _ api.Codec = (*codec)(nil)

// requestInfo is what the codec keeps of a request beyond its body.
type requestInfo struct {
	// store is the request's store flag; the API stores by default.
	store bool
	// chain is set when re-queries continue the stored conversation by
	// previous_response_id instead of replaying it.
	chain bool
	// conversation is set when the request names a conversation object.
	conversation bool
}

// ErrShape reports an answer that is JSON but not a Responses object.
var ErrShape = errors.New("responses: the answer is not a response object")

// errForeignTurn reports a turn that this codec did not build.
var errForeignTurn = errors.New("responses: turn from another codec")

// errNoRequest reports a codec used before it read a request.
var errNoRequest = errors.New("responses: no request")

// InjectTool implements api.Codec: the tool is appended last to the
// request's tools as a flat function tool, and the codec's request becomes
// the injected one, which re-queries then start from.
func (c *codec) InjectTool(t neutral.Offered) ([]byte, error) {
	if c.body == nil {
		return nil, errNoRequest
	}
	params := []byte(t.Parameters)
	if len(params) == 0 {
		params = []byte(`{"type":"object","properties":{}}`)
	}
	tool := jsonx.Object{
		{Key: "type", Value: []byte(`"function"`)},
		{Key: "name", Value: jsonx.String(t.Name)},
		{Key: "description", Value: jsonx.String(t.Description)},
		{Key: "parameters", Value: params},
		// The API makes function tools strict by default; toolgate checks
		// the arguments itself, so it asks for nothing stricter than the
		// client's own tools get.
		{Key: "strict", Value: []byte("false")},
	}
	out, err := jsonx.AppendToField(c.body, "tools", tool.Bytes())
	if err != nil {
		return nil, err
	}
	c.body = out
	return out, nil
}

// CallJSON implements api.Codec: a function_call item (custom_tool_call
// for custom tools), the shape the client would have received.
func (*codec) CallJSON(c neutral.ToolCall) []byte {
	if c.Kind == neutral.Custom {
		return jsonx.Object{
			{Key: "type", Value: []byte(`"custom_tool_call"`)},
			{Key: "call_id", Value: jsonx.String(c.ID)},
			{Key: "name", Value: jsonx.String(c.Name)},
			{Key: "input", Value: jsonx.String(string(c.Args))},
		}.Bytes()
	}
	return jsonx.Object{
		{Key: "type", Value: []byte(`"function_call"`)},
		{Key: "call_id", Value: jsonx.String(c.ID)},
		{Key: "name", Value: jsonx.String(c.Name)},
		{Key: "arguments", Value: jsonx.String(string(c.Args))},
	}.Bytes()
}

// EncodeEscalation implements api.Codec: the OpenAI error envelope, as on
// the Chat Completions route.
func (*codec) EncodeEscalation(e *neutral.Escalated) []byte {
	return openaiwire.EscalationError(e)
}

// EncodeError implements api.Codec: toolgate's own errors in the OpenAI
// error envelope, which the Responses API shares with Chat Completions.
func (*codec) EncodeError(f neutral.Failure) []byte {
	return openaiwire.Error(f)
}
