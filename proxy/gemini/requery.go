package gemini

import (
	"errors"
	"strings"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/neutral"
)

// ReQuery implements api.Codec. The request as sent upstream stays byte for
// byte (tools, systemInstruction, cachedContent, every earlier turn) except
// for what a re-query must change. Each replayed model turn is its content
// exactly as received, thought parts and thoughtSignatures included, as the
// API refuses a call replayed without its signature; it is followed by one
// user turn with one functionResponse per functionCall, in order.
func (c *codec) ReQuery(_ *neutral.Answer, q *neutral.Query) ([]byte, error) {
	obj, err := jsonx.ParseObject(c.body)
	if err != nil {
		return nil, err
	}
	obj = append(jsonx.Object(nil), obj...)
	contents, err := array(obj.Get("contents"))
	if err != nil {
		return nil, errors.New("gemini: contents is not an array")
	}
	contents = append([][]byte(nil), contents...)
	for _, round := range q.History {
		turns, err := replay(round)
		if err != nil {
			return nil, err
		}
		contents = append(contents, turns...)
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

// replay is one round as two turns: the model's content as received,
// then the user's functionResponse parts, one per call in order.
func replay(round neutral.Round) ([][]byte, error) {
	t, ok := round.Turn.Raw.(*turn)
	if !ok || t.content == nil {
		return nil, errors.New("gemini: replayed turn has no content of this codec")
	}
	if len(round.Replies) == 0 || len(round.Replies) != len(round.Turn.Calls) {
		return nil, errors.New("gemini: a replayed turn needs one reply per call")
	}
	parts := make([][]byte, len(round.Replies))
	for i, r := range round.Replies {
		call := round.Turn.Calls[i]
		if r.CallID != call.ID {
			return nil, errors.New("gemini: replies are not in the order of the calls")
		}
		parts[i] = functionResponse(call.ID, call.Name, r)
	}
	user := jsonx.Object{
		{Key: "role", Value: []byte(`"user"`)},
		{Key: "parts", Value: jsonx.AppendArray(nil, parts)},
	}
	return [][]byte{t.content, user.Bytes()}, nil
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
func functionResponse(id, name string, r neutral.CallReply) []byte {
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

// FollowUpRoute implements api.Codec: a re-query is always a
// plain generateContent call, whatever verb and framing the client asked
// for; every other query parameter (a key among them) stays as sent.
func (*codec) FollowUpRoute(path, rawQuery string) (string, string) {
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
