package mcp

import (
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// called checks a tool result against the tool's outputSchema. A result
// whose structuredContent fails it is replaced by an error result: the
// client would otherwise act on data the tool promised not to return.
func (cr *clientRequest) called(m *message, t tracked) ([]byte, bool) {
	results := cr.rt.pipe.JudgesResults()
	if t.output == nil && t.confirmed == "" && !results {
		return nil, false // nothing to check, and nothing to keep confirmed
	}
	res, err := jsonx.ParseObject(m.result)
	if err != nil {
		return nil, false
	}
	if inputRequired(res) {
		// The server asks for input before it completes the call: there is
		// no result yet to check, and the client's retry is judged anew.
		if t.confirmed != "" {
			return cr.keepConfirmed(m, res, t)
		}
		return nil, false
	}
	if id, ok := taskHandle(res); ok {
		// A task-augmented call answers with a handle; the result comes
		// later through tasks/result and is checked then.
		if t.output != nil || results {
			cr.sess.trackTask(id, t)
		}
		return nil, false
	}
	if out, ok := cr.outputChecked(m, res, t); ok {
		return out, true
	}
	if !results {
		return nil, false
	}
	out := cr.rt.pipe.Result(cr.ctx, &ToolResult{Message: m.raw, Result: m.result, Meta: res.Get("_meta"),
		ID: string(m.id), Server: cr.rt.cfg.Name, Tool: t.tool})
	return out, out != nil
}

// outputChecked checks a result against the tool's outputSchema, when it
// declares one, and gives the error result to send instead of a failing
// one.
func (cr *clientRequest) outputChecked(m *message, res jsonx.Object, t tracked) ([]byte, bool) {
	if t.output == nil {
		return nil, false
	}
	if string(compact(res.Get("isError"))) == "true" {
		return nil, false // an error result carries no structured content to check
	}
	out, fs := cr.rt.pipe.Output(&Output{Schema: t.output, Message: m.raw, Tool: t.tool, Structured: res.Get("structuredContent"),
		Meta: res.Get("_meta"), Version: t.version, Label: t.label})
	if out == nil {
		return nil, false
	}
	msgs := make([]string, len(fs))
	for i, f := range fs {
		msgs[i] = f.Message
	}
	cr.log().Warn("mcp result fails outputSchema; replaced by an error result",
		zap.String("tool", t.label), zap.String("catalog_version", t.version), zap.Strings("findings", msgs))
	return out, true
}
