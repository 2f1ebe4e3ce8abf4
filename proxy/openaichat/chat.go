// Package openaichat is the codec of OpenAI Chat Completions
// (POST /v1/chat/completions): it reads requests and answers into neutral
// values, writes re-queries in the shape the provider accepts, and encodes
// the pipeline's actions by splicing only what changed into the upstream's
// own bytes.
package openaichat

import (
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaiwire"
)

// API is the Chat Completions wire format. It is stateless and shared.
type API struct{}

var _ api.API = API{}

// Name implements api.API.
func (API) Name() string { return "chat" }

// NewCodec implements api.API.
func (API) NewCodec() api.Codec { return &codec{} }

// codec is one request's translator. The neutral request lives inside it,
// so decoding a request allocates no second value for it.
type codec struct {
	api.SSECodec

	req neutral.Request
	// legacy: the request offers its tools as functions (Chat's legacy
	// form), so a decision re-query narrows function_call, not tool_choice.
	legacy bool
	// mixed: the request offered tools in both forms. It cannot be
	// judged, so no call of its answer is let through.
	mixed bool
}

var _ api.Codec = (*codec)(nil)

// EncodeEscalation implements api.Codec.
func (*codec) EncodeEscalation(e *neutral.Escalated) []byte {
	return openaiwire.EscalationError(e)
}

// EncodeError implements api.Codec: toolgate's own errors in OpenAI's
// envelope, which every OpenAI SDK raises as an API error.
func (*codec) EncodeError(f neutral.Failure) []byte {
	return openaiwire.Error(f)
}

// NewStream implements api.Codec.
func (c *codec) NewStream() api.Stream {
	return &stream{choices: map[int]*streamChoice{}, mixed: c.mixed}
}
