package proxy

import (
	"context"
	"strings"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// JudgesResults says whether an MCP server's tool results are judged.
func (p *mcpPipeline) JudgesResults() bool {
	pol := p.rt.snap.Config.Catalog.Results
	return pol.Secrets != catalog.SecretsOff || pol.MaxBytes > 0 || p.rt.snap.AnyResultRules || p.rt.validators.HasResultValidators()
}

// Result judges an MCP server's tool result on its way to the client
// (docs/results.md): its text content and structuredContent.
func (p *mcpPipeline) Result(ctx context.Context, r *mcp.Result) []byte {
	res, err := jsonx.SplitObject(r.Result)
	if err != nil {
		return nil
	}
	c := resultCheck{id: r.ID, tool: r.Tool, text: mcpText(res.Get("content")), raw: r.Result, size: len(r.Result),
		structured: res.Get("structuredContent"), isError: string(res.Get("isError")) == "true"}
	j := newResultJudge(p.rt.snap, p.rt.validators, r.Server, "", nil)
	v := j.judge(ctx, &c)
	var out []byte
	if v.label == resultRedacted {
		if off, ok := locate(r.Message, r.Result, 0); ok {
			out = jsonx.Splice(r.Message, []jsonx.Edit{{Start: off, End: off + len(r.Result), Text: v.raw}})
		} else {
			v = resultVerdict{label: resultSecret, why: "carries a credential toolgate could not replace in place"}
		}
	}
	p.s.metrics.ToolResults.WithLabelValues("mcp", v.label).Inc()
	if v.refused() {
		p.s.recordResult(&site{api: apiMCP, version: p.rt.snap.Version, server: r.Server}, r.ID, r.Tool, v)
		out = jsonrpc.RefusedResult(r.Message, r.Tool, string(v.code()), v.why, r.Meta)
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
