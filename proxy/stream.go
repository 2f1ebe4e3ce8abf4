package proxy

// serveStream handles stream: true requests.
func (x *exchange) serveStream(body []byte) {
	x.writeFinalError(501, "not_implemented", "streaming is not validated yet")
}
