package gemini

import (
	"errors"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// InjectTool implements api.Codec: the declaration joins the last tool that
// declares functions (under the spelling that tool uses). Its schema is written in the form that tool's
// declarations use, so the request never mixes the two. The new body is
// the codec's request from then on: re-queries offer the tool too.
func (c *codec) InjectTool(t neutral.Offered) ([]byte, error) {
	obj, err := jsonx.ParseObject(c.body)
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
		key := spelling(tool, "functionDeclarations")
		decls, err := jsonx.ParseArray(tool.Get(key))
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
		tool = append(jsonx.Object(nil), tool...).Set(key, jsonx.AppendArray(nil, decls))
		tools[i] = tool.Bytes()
		c.body = obj.Set("tools", jsonx.AppendArray(nil, tools)).Bytes()
		return c.body, nil
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
