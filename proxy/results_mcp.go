package proxy

import (
	"context"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/proxy/pipeline"
)

// JudgesResults says whether an MCP server's tool results are judged.
func (p *mcpPipeline) JudgesResults() bool {
	return pipeline.JudgesResults(p.rt.Snap, p.rt.Validators)
}

// Result judges an MCP server's tool result on its way to the client
// (docs/results.md): its text content and structuredContent.
func (p *mcpPipeline) Result(ctx context.Context, r *mcp.ToolResult) []byte {
	res, err := jsonx.SplitObject(r.Result)
	if err != nil {
		return nil
	}
	c := pipeline.ResultCheck{ID: r.ID, Tool: r.Tool, Text: mcpText(res.Get("content")), Raw: r.Result, Size: len(r.Result),
		Structured: res.Get("structuredContent"), IsError: string(res.Get("isError")) == "true"}
	j := pipeline.NewResultJudge(p.rt.Snap, p.rt.Validators, r.Server, "", nil)
	v := j.Judge(ctx, &c)
	var out []byte
	if v.Label == pipeline.ResultRedacted {
		if off, ok := pipeline.Locate(r.Message, r.Result, 0); ok {
			out = jsonx.Splice(r.Message, []jsonx.Edit{{Start: off, End: off + len(r.Result), Text: v.Raw}})
		} else {
			v = pipeline.Unreplaced()
		}
	}
	p.s.metrics.ToolResults.WithLabelValues("mcp", v.Label).Inc()
	if v.Refused() {
		p.s.recorder.RecordResult(&pipeline.Facts{API: pipeline.APIMCP, CatalogVersion: p.rt.Snap.Version, Server: r.Server}, r.ID, r.Tool, v)
		out = jsonrpc.RefusedResult(r.Message, r.Tool, string(v.Code()), v.Why, r.Meta)
	}
	return out
}

// mcpText joins a result's text content blocks, as the model reads them.
func mcpText(content []byte) string {
	items, err := jsonx.SplitArray(content)
	if err != nil {
		return ""
	}
	var parts []string
	for _, it := range items {
		obj, err := jsonx.SplitObject(it)
		if err != nil {
			continue
		}
		if t, _ := jsonx.Unquote(obj.Get("type")); t != "text" {
			continue
		}
		if s, ok := jsonx.Unquote(obj.Get("text")); ok {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}
