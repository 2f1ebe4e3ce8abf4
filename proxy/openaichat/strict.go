package openaichat

import (
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaiwire"
)

// Strict mode on Chat Completions is `strict: true` on a tool's function
// object (https://platform.openai.com/docs/guides/function-calling#strict-mode).

// chatStrictSite is where a Chat tool keeps its flag: its function
// object, for a function tool (type "function", or no type).
func chatStrictSite(_ []byte, tool jsonx.Object) []byte {
	typ, _ := jsonx.Unquote(tool.Get("type"))
	if (typ != "function" && typ != "") || jsonx.IsNull(tool.Get("function")) {
		return nil
	}
	return tool.Get("function")
}

// StrictTools implements api.Codec.
func (c *codec) StrictTools() []api.StrictTool {
	sites, _, err := openaiwire.StrictSites(c.req.Body, chatStrictSite)
	if err != nil {
		return nil
	}
	return openaiwire.StrictTools(sites)
}

// StrictPerRequest implements api.Codec: the flag is per tool.
func (*codec) StrictPerRequest() bool { return false }

// MarkStrict implements api.Codec.
func (c *codec) MarkStrict(names []string) ([]byte, error) {
	sites, _, err := openaiwire.StrictSites(c.req.Body, chatStrictSite)
	if err != nil {
		return nil, err
	}
	body, err := openaiwire.MarkStrict(c.req.Body, sites, names)
	if err != nil {
		return nil, err
	}
	c.req.Body = body
	return body, nil
}

// UpstreamError implements api.Codec.
func (c *codec) UpstreamError(body []byte) (string, string) {
	_, names, _ := openaiwire.StrictSites(c.req.Body, chatStrictSite)
	return openaiwire.UpstreamError(body, names)
}
