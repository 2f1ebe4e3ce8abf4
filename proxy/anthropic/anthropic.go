// Package anthropic is the codec of the Anthropic Messages API (POST
// /v1/messages): it reads requests and answers into neutral values, writes
// re-queries in the shape the API accepts, and encodes the client's answer
// by splicing only what changed into the upstream's own bytes.
//
// Only `tool_use` blocks become calls. Server tools (`server_tool_use`),
// MCP calls (`mcp_tool_use`) and their result blocks live inside the
// assistant turn itself, need no answer from the client and are never
// judged; they are replayed and forwarded exactly as sent.
package anthropic

import (
	"errors"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
)

// API is the Messages API. It is stateless and shared.
type API struct{}

var _ api.API = API{}

// ErrShape reports JSON that is not in the shape of the Messages API.
var ErrShape = errors.New("anthropic: not a Messages API object")

// Name implements api.API.
func (API) Name() string { return "messages" }

// NewCodec implements api.API.
func (API) NewCodec() api.Codec { return &codec{} }

// codec is one request's exchange.
type codec struct {
	api.SSECodec

	// body is the request as it goes upstream: the client's, or with the
	// abstain exit once InjectTool added it. Re-queries extend it.
	body []byte
	// typed names the request's Anthropic-defined tools. Some of them
	// (bash, the text editor, computer use, memory) are run by the client,
	// so their calls arrive as ordinary tool_use blocks; they are recorded
	// as neutral.Other so that they are answered in re-queries but never
	// judged.
	typed map[string]bool
}

var _ api.Codec = (*codec)(nil)

// callOf is one tool_use block in neutral form. Its arguments are the input
// exactly as sent; whatever they are, the validator judges them.
func (c *codec) callOf(id, name string, input []byte) neutral.ToolCall {
	call := neutral.ToolCall{ID: id, Name: name, Args: input, Kind: neutral.Function}
	if c.typed[name] {
		call.Kind = neutral.Other
	}
	return call
}
