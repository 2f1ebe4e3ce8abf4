package api

import (
	"io"
	"net/http"

	"github.com/toolgate/toolgate/neutral"
)

// SSECodec holds the Codec methods that every API streaming in SSE alone
// answers the same way. Such a codec embeds it; Gemini, which also frames
// streams as a JSON array and routes follow-ups elsewhere, does not.
type SSECodec struct{}

// NewFramedStream implements Codec: the API streams in SSE only.
func (SSECodec) NewFramedStream(http.Header, io.Reader) (Stream, EventReader, bool) {
	return nil, nil, false
}

// FollowUpRoute implements Codec: a re-query goes where the request went;
// the body says whether it streams.
func (SSECodec) FollowUpRoute(path, rawQuery string) (string, string) { return path, rawQuery }

// Notes implements Codec: every fact worth noting is a judged call.
func (SSECodec) Notes(*neutral.Turn) []string { return nil }

// FoldedKey implements Codec: any key of the document that folds onto a
// protocol key is refused, wherever it is.
func (SSECodec) FoldedKey(data []byte) bool { return ProtocolKeys.In(data) }

// SSEStream holds the Stream methods of an SSE stream with a terminal
// event whose clients skip SSE comments.
type SSEStream struct{}

// Keepalive implements Stream: the clients skip SSE comments.
func (SSEStream) Keepalive() []byte { return KeepaliveComment }

// Complete implements Stream: the stream has a terminal event, so one that
// ends without it is cut, however cleanly.
func (SSEStream) Complete() bool { return false }
