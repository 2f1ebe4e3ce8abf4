package validate

import (
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/schema"
)

// CheckJSON judges a JSON object against a schema outside a tool call: an
// MCP server's own inputSchema beside a stricter catalog one, or a tool
// result's structuredContent against its outputSchema. where names the
// value in messages ("arguments", "structuredContent").
func CheckJSON(sch *jsonschema.Schema, raw []byte, where string) []Finding {
	v, f := decodeArgs(raw)
	if f != nil {
		f.Message = strings.Replace(f.Message, "arguments", where, 1)
		f.Detail = f.Message
		return []Finding{*f}
	}
	if sch == nil {
		return nil
	}
	err := schema.Validate(sch, v)
	if err == nil {
		return nil
	}
	out := appendSchemaFindings(nil, err)
	if where != "arguments" {
		for i := range out {
			out[i].Message = where + strings.TrimPrefix(out[i].Message, "arguments")
			out[i].Detail = where + strings.TrimPrefix(out[i].Detail, "arguments")
		}
	}
	return out
}
