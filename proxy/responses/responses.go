// Package responses is the codec of the OpenAI Responses API
// (POST /v1/responses): it reads requests and answers into neutral values,
// writes re-queries in the shapes the provider accepts (a stateless replay
// of the output items, or a chain on the bad response's id when the
// conversation is stored upstream), and writes the client's answer by
// splicing only what changed into the upstream's own bytes.
package responses

import (
	"errors"

	"github.com/toolgate/toolgate/proxy/api"
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
	api.SSECodec

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

// stored reports a request whose answers the upstream stores for the
// client to continue from (previous_response_id, item_reference), chained
// or not: a repaired answer then carries the ids of the stored response
// that holds the valid call, never those of the one that holds the bad.
func (i requestInfo) stored() bool { return i.store && !i.conversation }

// ErrShape reports an answer that is JSON but not a Responses object.
var ErrShape = errors.New("responses: the answer is not a response object")

// errForeignTurn reports a turn that this codec did not build.
var errForeignTurn = errors.New("responses: turn from another codec")

// errNoRequest reports a codec used before it read a request.
var errNoRequest = errors.New("responses: no request")
