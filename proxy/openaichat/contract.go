package openaichat

import (
	"io"
	"net/http"

	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/api"
)

// NewFramedStream implements api.Codec: this API streams in SSE only.
func (*codec) NewFramedStream(http.Header, io.Reader) (api.Stream, api.EventReader, bool) {
	return nil, nil, false
}

// FollowUpRoute implements api.Codec: a re-query goes where the request
// went; the body says whether it streams.
func (*codec) FollowUpRoute(path, rawQuery string) (string, string) { return path, rawQuery }

// Notes implements api.Codec: every fact worth noting is a judged call.
func (*codec) Notes(*neutral.Turn) []string { return nil }

// FoldedKey implements api.Codec: any key of the document that folds onto
// a protocol key is refused, wherever it is.
func (*codec) FoldedKey(data []byte) bool { return api.ProtocolKeys.In(data) }

// Keepalive implements api.Stream: this API's clients skip SSE comments.
func (*stream) Keepalive() []byte { return api.KeepaliveComment }

// Complete implements api.Stream: the stream has a terminal event, so one
// that ends without it is cut, however cleanly.
func (*stream) Complete() bool { return false }
