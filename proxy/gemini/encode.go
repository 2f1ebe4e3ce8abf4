package gemini

import (
	"fmt"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
)

// Render implements api.Adapter. Calls are matched to functionCall parts by
// order, the order ParseResponse read them in, so a replaced call keeps its
// id, its thoughtSignature and its place among the other parts. An
// escalated or abstained candidate becomes one text part with finishReason
// STOP; an escalation object rides in a top-level toolgate_escalation.
func (Adapter) Render(_ *api.Request, resp *api.Response, finals []api.Final) ([]byte, error) {
	obj, err := jsonx.ParseObject(resp.Body)
	if err != nil {
		return nil, err
	}
	obj = append(jsonx.Object(nil), obj...)
	cands, err := array(obj.Get("candidates"))
	if err != nil {
		return nil, err
	}
	cands = append([][]byte(nil), cands...)
	var escObj []byte
	for i := range cands {
		if i >= len(finals) {
			break
		}
		f := finals[i]
		c, err := jsonx.ParseObject(cands[i])
		if err != nil {
			return nil, err
		}
		c = append(jsonx.Object(nil), c...)
		if text, esc, ok := f.Replacement(); ok {
			c = c.Set("content", textContent(c.Get("content"), nil, text)).Set("finishReason", []byte(`"STOP"`))
			if escObj == nil {
				escObj = esc
			}
		} else if f.Result != nil && f.Result.AnyChanged() {
			content, _, err := spliceCalls(c.Get("content"), f, 0)
			if err != nil {
				return nil, err
			}
			c = c.Set("content", content)
		} else {
			continue
		}
		cands[i] = c.Bytes()
	}
	obj = obj.Set("candidates", jsonx.AppendArray(nil, cands))
	if escObj != nil {
		obj = obj.Set("toolgate_escalation", escObj)
	}
	return obj.Bytes(), nil
}

// textContent is a content object whose parts are kept, then text (when
// not empty), with the role of orig.
func textContent(orig []byte, kept [][]byte, text string) []byte {
	parts := append([][]byte(nil), kept...)
	if text != "" {
		parts = append(parts, jsonx.Object{{Key: "text", Value: jsonx.String(text)}}.Bytes())
	}
	role := []byte(`"model"`)
	if c, err := jsonx.ParseObject(orig); err == nil && c.Has("role") {
		role = c.Get("role")
	}
	return jsonx.Object{{Key: "parts", Value: jsonx.AppendArray(nil, parts)}, {Key: "role", Value: role}}.Bytes()
}

// spliceCalls replaces the changed calls among a content object's parts;
// first is the position of its first call in the whole turn. It returns
// the content and how many calls it holds.
func spliceCalls(content []byte, f api.Final, first int) ([]byte, int, error) {
	c, err := jsonx.ParseObject(content)
	if err != nil {
		return nil, 0, err
	}
	parts, err := array(c.Get("parts"))
	if err != nil {
		return nil, 0, err
	}
	parts = append([][]byte(nil), parts...)
	n := 0
	for i, raw := range parts {
		p, err := jsonx.ParseObject(raw)
		if err != nil {
			return nil, 0, err
		}
		fcRaw := p.Get("functionCall")
		if fcRaw == nil {
			continue
		}
		j := first + n
		n++
		if !f.ChangedAt(j) {
			continue
		}
		fc, err := jsonx.ParseObject(fcRaw)
		if err != nil {
			return nil, 0, fmt.Errorf("gemini: functionCall: %w", err)
		}
		nc := f.Result.Calls[j]
		args, err := objectJSON(nc.Args)
		if err != nil {
			return nil, 0, err
		}
		fc = append(jsonx.Object(nil), fc...).Set("name", jsonx.String(nc.Name)).Set("args", args)
		parts[i] = append(jsonx.Object(nil), p...).Set("functionCall", fc.Bytes()).Bytes()
	}
	c = append(jsonx.Object(nil), c...).Set("parts", jsonx.AppendArray(nil, parts))
	return c.Bytes(), n, nil
}
