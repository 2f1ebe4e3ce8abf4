package neutral

// FailureCode is the machine-readable code of one of toolgate's own
// errors: the closed set every codec writes in its envelope.
type FailureCode string

// Failure codes. Route refusals (misspelt paths, methods, encodings) carry
// their own reason as the code; see the proxy's guard.
const (
	// CodeUpstream: the upstream could not be used or sent an answer
	// toolgate cannot judge.
	CodeUpstream FailureCode = "upstream_error"
	// CodeUpstreamTimeout: a stream went silent past idle_timeout.
	CodeUpstreamTimeout FailureCode = "upstream_timeout"
	// CodeInternal: toolgate failed itself; the request id finds the log.
	CodeInternal FailureCode = "toolgate_internal_error"
	// CodeAuth: the inbound token is missing or wrong.
	CodeAuth FailureCode = "authentication_error"
	// CodeRequestTooLarge: the request body exceeds max_request_bytes.
	CodeRequestTooLarge FailureCode = "request_too_large"
	// CodeRequestTimeout: the request body did not arrive in time.
	CodeRequestTimeout FailureCode = "request_timeout"
	// CodeRequestRead: the request body could not be read.
	CodeRequestRead FailureCode = "request_read_error"
	// CodeStoreUnavailable: the approval store cannot be reached; a held
	// call stays held.
	CodeStoreUnavailable FailureCode = "store_unavailable"
)

// Failure is one of toolgate's own errors, classified in one place: the
// codecs only wrap it in their API's envelope.
type Failure struct {
	// Status is the HTTP status when the answer has not begun.
	Status  int
	Code    FailureCode
	Message string
	// Retryable says whether the client's retry may meet another result;
	// it decides X-Should-Retry.
	Retryable bool
	// Refusal marks a refusal of the request itself (a route, method or
	// encoding toolgate does not judge), which APIs type as invalid.
	Refusal bool
}
