package responses

import (
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/proxy/openaiwire"
)

// Strict mode on Responses is `strict: true` on the function tool
// itself (https://platform.openai.com/docs/guides/function-calling#strict-mode).

// responsesStrictSite is where a Responses tool keeps its flag: on the
// function tool itself, beside its name and parameters.
func responsesStrictSite(raw []byte, tool jsonx.Object) []byte {
	if typ, _ := jsonx.Unquote(tool.Get("type")); typ != "function" {
		return nil
	}
	return raw
}

// StrictTools implements api.Codec.
func (c *codec) StrictTools() []api.StrictTool {
	sites, _, err := openaiwire.StrictSites(c.body, responsesStrictSite)
	if err != nil {
		return nil
	}
	return openaiwire.StrictTools(sites)
}

// StrictPerRequest implements api.Codec: the flag is per tool.
func (*codec) StrictPerRequest() bool { return false }

// MarkStrict implements api.Codec.
func (c *codec) MarkStrict(names []string) ([]byte, error) {
	sites, _, err := openaiwire.StrictSites(c.body, responsesStrictSite)
	if err != nil {
		return nil, err
	}
	body, err := openaiwire.MarkStrict(c.body, sites, names)
	if err != nil {
		return nil, err
	}
	c.body = body
	return body, nil
}

// UpstreamError implements api.Codec.
func (c *codec) UpstreamError(body []byte) (string, string) {
	_, names, _ := openaiwire.StrictSites(c.body, responsesStrictSite)
	return openaiwire.UpstreamError(body, names)
}
