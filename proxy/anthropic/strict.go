package anthropic

import (
	"encoding/json"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
)

// Strict tool use is `strict: true` on a tool definition, beside its
// input_schema (https://platform.claude.com/docs/en/agents-and-tools/tool-use/strict-tool-use).
// It is generally available on the Messages API and needs no beta header
// there (https://platform.claude.com/docs/en/build-with-claude/structured-outputs);
// a client that still sends one keeps it, as every header is forwarded.

// strictSite is one function tool of the request: the tool object (a
// slice of the body) and what it declares.
type strictSite struct {
	tool   []byte
	name   string
	schema []byte
	client bool
}

// strictSites reads the request's tools; names holds every entry's name
// in order, "" for a server tool.
func (c *codec) strictSites() (sites []strictSite, names []string) {
	top, err := jsonx.SplitObject(c.body)
	if err != nil || jsonx.IsNull(top.Get("tools")) {
		return nil, nil
	}
	tools, err := jsonx.SplitArray(top.Get("tools"))
	if err != nil {
		return nil, nil
	}
	names = make([]string, len(tools))
	for i, raw := range tools {
		obj, err := jsonx.SplitObject(raw)
		if err != nil {
			return nil, nil
		}
		typ, _ := jsonx.Unquote(obj.Get("type"))
		if jsonx.IsNull(obj.Get("input_schema")) || (typ != "" && typ != "custom") {
			continue
		}
		s := strictSite{tool: raw, schema: obj.Get("input_schema")}
		s.name, _ = jsonx.Unquote(obj.Get("name"))
		switch string(obj.Get("strict")) {
		case "true", "false":
			s.client = true
		}
		names[i] = s.name
		sites = append(sites, s)
	}
	return sites, names
}

// StrictTools implements api.Codec.
func (c *codec) StrictTools() []api.StrictTool {
	sites, _ := c.strictSites()
	out := make([]api.StrictTool, len(sites))
	for i, s := range sites {
		out[i] = api.StrictTool{Name: s.name, Schema: s.schema, Client: s.client}
	}
	return out
}

// StrictPerRequest implements api.Codec: the flag is per tool.
func (*codec) StrictPerRequest() bool { return false }

// MarkStrict implements api.Codec.
func (c *codec) MarkStrict(names []string) ([]byte, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	sites, _ := c.strictSites()
	var edits []jsonx.Edit
	for _, s := range sites {
		if !want[s.name] || s.client {
			continue
		}
		e, err := jsonx.SetMember(c.body, s.tool, "strict", []byte("true"))
		if err != nil {
			return nil, err
		}
		edits = append(edits, e)
	}
	if len(edits) > 0 {
		c.body = jsonx.Splice(c.body, edits)
	}
	return c.body, nil
}

// UpstreamError implements api.Codec: Anthropic's envelope is
// {"type":"error","error":{"type":…,"message":…}}, and its messages
// point at a tool by its place ("tools.2.input_schema…").
func (c *codec) UpstreamError(body []byte) (string, string) {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	_, names := c.strictSites()
	return e.Error.Message + " (" + e.Error.Type + ")", api.ToolNamed(e.Error.Message, names)
}
