package mcp

import (
	"net/http"

	"github.com/toolgate/toolgate/internal/httpx"
)

// outboundHeader copies the client's headers for the server: all but
// hop-by-hop ones, toolgate's namespace and framing. Accept-Encoding goes
// too, so the transport negotiates compression itself and toolgate reads
// plain JSON whatever the client accepts.
func outboundHeader(in http.Header) http.Header {
	out := in.Clone()
	cleanHeader(out)
	out.Del("Content-Length")
	out.Del("Host")
	out.Del("Accept-Encoding")
	return out
}

// cleanHeader drops what must not cross toolgate in either direction.
func cleanHeader(h http.Header) {
	httpx.RemoveHop(h)
	httpx.DropToolgateHeaders(h)
}

// copyHeader copies the server's answer headers to the client. Unless the
// body passes unchanged, its length is toolgate's to set.
func (cr *clientRequest) copyHeader(h http.Header, keepLength bool) {
	dst := cr.w.Header()
	src := h.Clone()
	cleanHeader(src)
	if !keepLength {
		src.Del("Content-Length")
	}
	for k, v := range src {
		dst[k] = v
	}
}
