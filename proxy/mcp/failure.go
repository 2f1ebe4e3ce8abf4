package mcp

import (
	"net/http"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
)

// toolgate's own errors on an MCP route are the pipeline's failure
// classes, the same values a model route answers with: made where they
// arise, and written once, by the JSON-RPC codec, as an error whose
// data.code is the failure code.

// failure is f as the JSON-RPC error answering request id.
func (cr *clientRequest) failure(id []byte, f neutral.Failure) []byte { return jsonrpc.Error(id, f) }

// upstreamFailure is a server toolgate could not use: unreachable, too
// slow, or an answer it could not read or relay. The client's retry may
// meet another result.
func upstreamFailure(msg string) neutral.Failure {
	return neutral.Failure{Status: http.StatusBadGateway, Code: neutral.CodeUpstream, Message: msg, Retryable: true}
}

// storeFailure is an approval store toolgate could not reach: the call
// stays held, and a retry may meet the store again.
func storeFailure(msg string) neutral.Failure {
	return neutral.Failure{Status: http.StatusServiceUnavailable, Code: neutral.CodeStoreUnavailable, Message: msg, Retryable: true}
}
