package jsonrpc

import (
	"encoding/json"
	"strconv"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// metaResult is the _meta key of a refused tool result's finding.
const metaResult = "toolgate/result"

// RefusedResult replaces a server's tool result toolgate refused to pass
// to the model (a credential, a false result rule, a validator's denial,
// a result over max_bytes) with an error result naming the finding, never
// the result's text. msg is the response message; meta the result's own
// _meta, which stays.
func RefusedResult(msg []byte, tool, code, why string, meta []byte) []byte {
	kept := map[string]any{}
	if obj, err := jsonx.ParseObject(meta); err == nil {
		for _, f := range obj {
			kept[f.Key] = json.RawMessage(f.Value)
		}
	}
	kept[metaResult] = map[string]any{"code": code, "message": why}
	out := toolResult{
		Content: []textContent{{Type: "text", Text: "toolgate withheld the result of " + strconv.Quote(tool) + " (" + code + "): it " + why +
			". Do not rely on this call having produced data."}},
		IsError: true,
		Meta:    kept,
	}
	obj, err := jsonx.ParseObject(msg)
	if err != nil {
		return msg
	}
	if res, err := jsonx.ParseObject(obj.Get("result")); err == nil {
		out.ResultType, _ = jsonx.Unquote(res.Get("resultType"))
	}
	b, _ := jsonx.Marshal(out)
	return obj.Set("result", b).Bytes()
}
