package openaiwire

import (
	"encoding/json"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
)

// StrictSite is one function tool of an OpenAI request where its strict
// flag lives: the object that carries it (Chat: the tool's function,
// Responses: the tool itself), and what the client put there.
type StrictSite struct {
	Name   string
	Schema []byte
	// Flag is the object holding strict, a slice of the request body.
	Flag   []byte
	Client bool
}

// StrictSites reads the function tools of body's tools array; names holds
// every entry's tool name in order ("" for other tools), for UpstreamError.
// site returns the object of one entry (raw, split as tool) that holds the flag, or nil for a
// tool that is not a function tool.
func StrictSites(body []byte, site func(raw []byte, tool jsonx.Object) []byte) (sites []StrictSite, names []string, err error) {
	top, err := jsonx.SplitObject(body)
	if err != nil {
		return nil, nil, err
	}
	raw := top.Get("tools")
	if jsonx.IsNull(raw) {
		return nil, nil, nil
	}
	tools, err := jsonx.SplitArray(raw)
	if err != nil {
		return nil, nil, err
	}
	names = make([]string, len(tools))
	for i, t := range tools {
		obj, err := jsonx.SplitObject(t)
		if err != nil {
			return nil, nil, err
		}
		flag := site(t, obj)
		if flag == nil {
			continue
		}
		fn, err := jsonx.SplitObject(flag)
		if err != nil {
			return nil, nil, err
		}
		name, _ := jsonx.Unquote(fn.Get("name"))
		names[i] = name
		s := StrictSite{Name: name, Schema: fn.Get("parameters"), Flag: flag}
		switch string(fn.Get("strict")) {
		case "true", "false":
			s.Client = true
		}
		sites = append(sites, s)
	}
	return sites, names, nil
}

// StrictTools is the pipeline's view of the sites.
func StrictTools(sites []StrictSite) []api.StrictTool {
	out := make([]api.StrictTool, len(sites))
	for i, s := range sites {
		out[i] = api.StrictTool{Name: s.Name, Schema: s.Schema, Client: s.Client}
	}
	return out
}

// MarkStrict sets strict: true on the named sites of body, splicing the
// flag in; a site the client decided is never touched.
func MarkStrict(body []byte, sites []StrictSite, names []string) ([]byte, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	var edits []jsonx.Edit
	for _, s := range sites {
		if !want[s.Name] || s.Client {
			continue
		}
		e, err := jsonx.SetMember(body, s.Flag, "strict", []byte("true"))
		if err != nil {
			return nil, err
		}
		edits = append(edits, e)
	}
	if len(edits) == 0 {
		return body, nil
	}
	return jsonx.Splice(body, edits), nil
}

// UpstreamError reads OpenAI's error envelope: the message, the param it
// names and the code, and the tool they point at.
func UpstreamError(body []byte, names []string) (message, tool string) {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Param   string `json:"param"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", ""
	}
	text := e.Error.Message + " (" + e.Error.Param + ", " + e.Error.Code + ")"
	return text, api.ToolNamed(e.Error.Param+" "+e.Error.Message, names)
}
