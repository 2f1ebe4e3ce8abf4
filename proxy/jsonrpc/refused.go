package jsonrpc

import "strconv"

// metaResult is the _meta key of a refused tool result's finding.
const metaResult = "toolgate/result"

// RefusedResult replaces a server's tool result toolgate refused to pass
// to the model (a credential, a false result rule, a validator's denial,
// a result over max_bytes) with an error result naming the finding, never
// the result's text. msg is the response message; meta the result's own
// _meta, which stays.
func RefusedResult(msg []byte, tool, code, why string, meta []byte) []byte {
	return replaceResult(msg, meta, metaResult, map[string]any{"code": code, "message": why},
		"toolgate withheld the result of "+strconv.Quote(tool)+" ("+code+"): it "+why+
			". Do not rely on this call having produced data.")
}
