package mcp

import (
	"encoding/json"
	"strconv"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// called checks a tool result against the tool's outputSchema. A result
// whose structuredContent fails it is replaced by an error result: the
// client would otherwise act on data the tool promised not to return.
func (x *exchange) called(m *message, t tracked) ([]byte, bool) {
	if t.output == nil {
		return nil, false
	}
	res, err := jsonx.ParseObject(m.result)
	if err != nil {
		return nil, false
	}
	if string(compact(res.Get("isError"))) == "true" {
		return nil, false // an error result carries no structured content to check
	}
	if id, ok := taskHandle(res); ok {
		// A task-augmented call answers with a handle; the result comes
		// later through tasks/result and is checked then.
		x.sess.trackTask(id, t)
		return nil, false
	}
	fs := x.rt.pipe.Output(&Output{Schema: t.output, Structured: res.Get("structuredContent"), Version: t.version, Label: t.label})
	if len(fs) == 0 {
		return nil, false
	}
	msgs := make([]string, len(fs))
	for i, f := range fs {
		msgs[i] = f.Message
	}
	x.log().Warn("mcp result fails outputSchema; replaced by an error result",
		zap.String("tool", t.label), zap.String("catalog_version", t.version), zap.Strings("findings", msgs))
	text := "toolgate withheld the result of " + strconv.Quote(t.tool) + ": it does not match the tool's outputSchema:\n"
	for _, f := range fs {
		text += "- " + f.Message + "\n"
	}
	out := toolResult{
		Content: []textContent{{Type: "text", Text: text + "The tool may have misbehaved; do not rely on this call having produced data."}},
		IsError: true,
		Meta:    keptMeta(res.Get("_meta")),
	}
	out.Meta["toolgate/output"] = map[string]any{"findings": findingsJSON(fs)}
	b, _ := jsonx.Marshal(out)
	return replaceMember(m.raw, "result", b), true
}

// keptMeta is the _meta of a replaced result: what the server put there
// stays, e.g. the related-task entry a tasks/result answer must carry.
func keptMeta(raw []byte) map[string]any {
	meta := map[string]any{}
	if obj, err := jsonx.ParseObject(raw); err == nil {
		for _, f := range obj {
			meta[f.Key] = json.RawMessage(f.Value)
		}
	}
	return meta
}
