package gemini

import (
	"encoding/json"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
)

// Gemini's strict mode is one for the whole request: functionCallingConfig
// mode VALIDATED, under which the model may still answer in text but its
// calls are constrained to the declarations' schemas
// (https://ai.google.dev/gemini-api/docs/function-calling#function_calling_modes).

// validatedMode is the mode toolgate sets.
var validatedMode = []byte(`"VALIDATED"`)

// StrictTools implements api.Codec: the declarations as DecodeRequest
// reads them (their schemas as JSON Schema); every one counts as the
// client's when the client set a function calling mode itself.
func (c *codec) StrictTools() []api.StrictTool {
	req, err := (&codec{}).DecodeRequest(c.path, c.body)
	if err != nil {
		return nil
	}
	_, _, fc := c.callingConfig()
	client := false
	if fc != nil {
		obj, err := jsonx.SplitObject(fc)
		client = err != nil || !jsonx.IsNull(obj.Get("mode"))
	}
	out := make([]api.StrictTool, len(req.Offered))
	for i, o := range req.Offered {
		out[i] = api.StrictTool{Name: o.Name, Schema: o.Parameters, Client: client}
	}
	return out
}

// callingConfig finds the request's toolConfig and its
// functionCallingConfig, in whichever spelling the client used; snake
// reports snake_case.
func (c *codec) callingConfig() (tc []byte, snake bool, fc []byte) {
	top, err := jsonx.SplitObject(c.body)
	if err != nil {
		return nil, false, nil
	}
	tc, snake = top.Get("toolConfig"), false
	if tc == nil {
		tc, snake = top.Get("tool_config"), top.Has("tool_config")
	}
	if jsonx.IsNull(tc) {
		return nil, snake, nil
	}
	obj, err := jsonx.SplitObject(tc)
	if err != nil {
		return tc, snake, nil
	}
	if fc = obj.Get("functionCallingConfig"); fc == nil {
		fc = obj.Get("function_calling_config")
	}
	if jsonx.IsNull(fc) {
		fc = nil
	}
	return tc, snake, fc
}

// StrictPerRequest implements api.Codec.
func (*codec) StrictPerRequest() bool { return true }

// MarkStrict implements api.Codec: the mode is set where the
// client's own toolConfig would hold it, or a toolConfig is added.
func (c *codec) MarkStrict(names []string) ([]byte, error) {
	if len(names) == 0 {
		return c.body, nil
	}
	tc, snake, fc := c.callingConfig()
	fcKey, tcKey := "functionCallingConfig", "toolConfig"
	if snake {
		fcKey = "function_calling_config"
	}
	var (
		e   jsonx.Edit
		err error
	)
	switch {
	case fc != nil:
		e, err = jsonx.SetMember(c.body, fc, "mode", validatedMode)
	case tc != nil:
		e, err = jsonx.SetMember(c.body, tc, fcKey, []byte(`{"mode":"VALIDATED"}`))
	default:
		e, err = jsonx.SetMember(c.body, c.body, tcKey, []byte(`{"functionCallingConfig":{"mode":"VALIDATED"}}`))
	}
	if err != nil {
		return nil, err
	}
	c.body = jsonx.Splice(c.body, []jsonx.Edit{e})
	return c.body, nil
}

// UpstreamError implements api.Codec: Google's envelope is
// {"error":{"code":…,"message":…,"status":…}}. The mode is the request's,
// so no one tool is named.
func (c *codec) UpstreamError(body []byte) (string, string) {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	return e.Error.Message + " (" + e.Error.Status + ")", ""
}
