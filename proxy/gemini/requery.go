package gemini

import (
	"errors"
	"strings"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/recovery"
)

// FollowUp implements api.Adapter. The original request stays byte for
// byte (tools, systemInstruction, cachedContent, every earlier turn) except
// for what a re-query must change. Each replayed model turn is its content
// exactly as received, thought parts and thoughtSignatures included, as the
// API refuses a call replayed without its signature; it is followed by one
// user turn with one functionResponse per functionCall, in order.
func (Adapter) FollowUp(req *api.Request, _ *api.Response, q *recovery.Query) ([]byte, error) {
	obj, err := jsonx.ParseObject(req.Body)
	if err != nil {
		return nil, err
	}
	obj = append(jsonx.Object(nil), obj...)
	contents, err := array(obj.Get("contents"))
	if err != nil {
		return nil, errors.New("gemini: contents is not an array")
	}
	contents = append([][]byte(nil), contents...)
	for _, ex := range q.History {
		t, ok := ex.Turn.Raw.(*turn)
		if !ok || t.content == nil {
			return nil, errors.New("gemini: replayed turn has no content of this adapter")
		}
		if len(ex.Replies) == 0 || len(ex.Replies) != len(ex.Turn.Calls) {
			return nil, errors.New("gemini: a replayed turn needs one reply per call")
		}
		parts := make([][]byte, len(ex.Replies))
		for i, r := range ex.Replies {
			c := ex.Turn.Calls[i]
			if r.CallID != c.ID {
				return nil, errors.New("gemini: replies are not in the order of the calls")
			}
			parts[i] = functionResponse(c.ID, c.Name, r)
		}
		contents = append(contents, t.content, jsonx.Object{
			{Key: "role", Value: []byte(`"user"`)},
			{Key: "parts", Value: jsonx.AppendArray(nil, parts)},
		}.Bytes())
	}
	obj = obj.Set("contents", jsonx.AppendArray(nil, contents))
	obj = setIn(obj, "generationConfig", func(g jsonx.Object) jsonx.Object {
		if g.Has("candidateCount") {
			// One answer is judged per re-query.
			g = g.Set("candidateCount", []byte("1"))
		}
		if q.Decision {
			// The decision is asked for as text, which a response schema
			// would forbid.
			g = g.Delete("responseSchema").Delete("responseJsonSchema").Delete("responseMimeType")
		}
		return g
	})
	if q.Decision {
		obj = setIn(obj, "toolConfig", func(tc jsonx.Object) jsonx.Object {
			return tc.Set("functionCallingConfig", []byte(`{"mode":"NONE"}`))
		})
	}
	return obj.Bytes(), nil
}

// setIn edits the object at key, present or not; an edit that leaves it
// empty where it was absent adds nothing.
func setIn(obj jsonx.Object, key string, edit func(jsonx.Object) jsonx.Object) jsonx.Object {
	raw := obj.Get(key)
	inner, err := jsonx.ParseObject(raw)
	if err != nil {
		inner = nil
	}
	inner = edit(append(jsonx.Object(nil), inner...))
	if raw == nil && len(inner) == 0 {
		return obj
	}
	return obj.Set(key, inner.Bytes())
}

// functionResponse answers one call: by name, and by id when the model
// gave one. An error goes under "error", anything else under "output", the
// keys the API documents.
func functionResponse(id, name string, r recovery.Reply) []byte {
	fr := jsonx.Object{}
	if !strings.HasPrefix(id, syntheticID) {
		fr = append(fr, jsonx.Field{Key: "id", Value: jsonx.String(id)})
	}
	key := "output"
	if r.IsError {
		key = "error"
	}
	fr = append(fr,
		jsonx.Field{Key: "name", Value: jsonx.String(name)},
		jsonx.Field{Key: "response", Value: jsonx.Object{{Key: key, Value: jsonx.String(r.Content)}}.Bytes()})
	return jsonx.Object{{Key: "functionResponse", Value: fr.Bytes()}}.Bytes()
}

// FollowUpRoute implements api.FollowUpRouter: a re-query is always a
// plain generateContent call, whatever verb and framing the client asked
// for; every other query parameter (a key among them) stays as sent.
func (Adapter) FollowUpRoute(path, rawQuery string) (string, string) {
	if p, ok := strings.CutSuffix(path, verbStream); ok {
		path = p + verbPlain
	}
	if rawQuery == "" {
		return path, ""
	}
	kept := make([]string, 0, 2)
	for _, kv := range strings.Split(rawQuery, "&") {
		if k, _, _ := strings.Cut(kv, "="); k != "alt" {
			kept = append(kept, kv)
		}
	}
	return path, strings.Join(kept, "&")
}

var _ api.FollowUpRouter = Adapter{}

// InjectTool implements api.ToolInjector: the declaration joins the last
// tool that declares functions. Its schema is written in the form that
// tool's declarations use, so the request never mixes the two.
func (Adapter) InjectTool(req *api.Request, t catalog.Offered) ([]byte, error) {
	obj, err := jsonx.ParseObject(req.Body)
	if err != nil {
		return nil, err
	}
	obj = append(jsonx.Object(nil), obj...)
	tools, err := jsonx.ParseArray(obj.Get("tools"))
	if err != nil {
		return nil, errors.New("gemini: no tools to add to")
	}
	tools = append([][]byte(nil), tools...)
	for i := len(tools) - 1; i >= 0; i-- {
		tool, err := jsonx.ParseObject(tools[i])
		if err != nil {
			continue
		}
		decls, err := jsonx.ParseArray(tool.Get("functionDeclarations"))
		if err != nil || len(decls) == 0 {
			continue
		}
		d := jsonx.Object{{Key: "name", Value: jsonx.String(t.Name)}, {Key: "description", Value: jsonx.String(t.Description)}}
		if last, err := jsonx.ParseObject(decls[len(decls)-1]); err == nil && last.Has("parameters") {
			params, ok := openAPIForm(t.Parameters, 0)
			if !ok {
				return nil, errors.New("gemini: the tool's schema has no OpenAPI form")
			}
			d = append(d, jsonx.Field{Key: "parameters", Value: params})
		} else {
			d = append(d, jsonx.Field{Key: "parametersJsonSchema", Value: t.Parameters})
		}
		decls = append(append([][]byte(nil), decls...), d.Bytes())
		tool = append(jsonx.Object(nil), tool...).Set("functionDeclarations", jsonx.AppendArray(nil, decls))
		tools[i] = tool.Bytes()
		return obj.Set("tools", jsonx.AppendArray(nil, tools)).Bytes(), nil
	}
	return nil, errors.New("gemini: no tool declares functions")
}

// openAPIForm writes a simple JSON Schema (types, properties, items,
// required, description, enum) in the API's OpenAPI form. It reports false
// for anything else rather than drop a constraint. additionalProperties
// false is dropped: the OpenAPI form cannot say it, and the call is judged
// by the JSON Schema all the same.
func openAPIForm(schema []byte, depth int) ([]byte, bool) {
	in, err := jsonx.ParseObject(schema)
	if err != nil || depth > 16 {
		return nil, false
	}
	out := jsonx.Object{}
	for _, f := range in {
		v := f.Value
		switch f.Key {
		case "type":
			s, ok := jsonx.Unquote(v)
			if !ok {
				return nil, false
			}
			v = jsonx.String(strings.ToUpper(s))
		case "properties":
			props, err := jsonx.ParseObject(v)
			if err != nil {
				return nil, false
			}
			conv := jsonx.Object{}
			for _, p := range props {
				pv, ok := openAPIForm(p.Value, depth+1)
				if !ok {
					return nil, false
				}
				conv = append(conv, jsonx.Field{Key: p.Key, Value: pv})
			}
			v = conv.Bytes()
		case "items":
			iv, ok := openAPIForm(v, depth+1)
			if !ok {
				return nil, false
			}
			v = iv
		case "additionalProperties":
			if string(v) != "false" {
				return nil, false
			}
			continue
		case "required", "description", "enum", "title":
		default:
			return nil, false
		}
		out = append(out, jsonx.Field{Key: f.Key, Value: v})
	}
	return out.Bytes(), true
}
