// Package gemini is the codec of the Google Gemini API
// (models/{model}:generateContent and :streamGenerateContent, under /v1beta/
// and /v1/, and Vertex AI paths mapped to it) for toolgate's neutral
// pipeline: it reads requests and
// answers, writes re-queries in the shape the API accepts, and renders the
// client's answer by splicing only what changed into the upstream's bytes.
//
// Only functionCall parts become calls, judged against the request's
// functionDeclarations (OpenAPI-style `parameters` translated to the JSON
// Schema they mean, or `parametersJsonSchema` as is). Built-in tools
// (googleSearch, codeExecution, urlContext…) and their parts need no answer
// from the client and are never judged.
package gemini

import (
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/api"
)

// API is the Gemini API. It is stateless and shared.
type API struct{}

var _ api.API = API{}

// Name implements api.API.
func (API) Name() string { return "gemini" }

// NewCodec implements api.API.
func (API) NewCodec() api.Codec { return &codec{} }

// codec is one request's exchange. DecodeRequest fills it; InjectTool
// replaces its body, so re-queries carry the tool the upstream was offered.
type codec struct {
	// body is the request as sent upstream.
	body []byte
	// path is the request's path less the route's prefix: it names the
	// verb, which says how a streamed answer is framed.
	path string
}

var _ api.Codec = (*codec)(nil)

// ErrShape reports JSON that is not in the shape of the Gemini API.
var ErrShape = errors.New("gemini: not a Gemini API object")

// errFolded reports a key that differs from a Gemini key only by letter
// case: Go's decoder would read it as the key while a JavaScript client
// would not, so what toolgate judged and what the agent runs could differ.
var errFolded = fmt.Errorf("gemini: %w", api.ErrFoldedKey)

// keyNames are the Gemini keys that carry calls, text and their framing,
// by their JSON names.
var keyNames = []string{
	"candidates", "content", "parts", "functionCall", "name", "args", "id", "text", "thought",
	"thoughtSignature", "finishReason", "usageMetadata", "promptTokenCount", "candidatesTokenCount",
	"thoughtsTokenCount", "toolUsePromptTokenCount", "index", "role", "error", "promptFeedback",
	"responseId", "partialArgs", "willContinue", "jsonPath", "stringValue", "numberValue",
	"boolValue", "nullValue",
}

// keys are keyNames under both spellings.
var keys = func() *jsonx.KeyFold {
	names := append([]string(nil), keyNames...)
	for _, n := range keyNames {
		if s := snakeOf(n); s != n {
			names = append(names, s)
		}
	}
	return jsonx.NewKeyFold(names...)
}()

// FoldedKey implements api.Codec: keys are checked at every level
// toolgate reads (the response, its usage, candidates, contents, parts,
// functionCall objects and their partial arguments), never inside args,
// whose keys are the function's parameters and judged by its schema. An
// object that spells one field both in camelCase and in snake_case is
// refused the same way: clients would disagree on which one they read.
func (*codec) FoldedKey(data []byte) bool { return foldedKey(data) }

// foldedKey is FoldedKey for the answers and stream chunks the codec
// reads itself.
func foldedKey(data []byte) bool {
	obj, err := jsonx.ParseObject(data)
	if err != nil {
		// Not an object: the parser refuses it.
		return false
	}
	if folded(obj) || folded(object(get(obj, "usageMetadata"))) {
		return true
	}
	cands, _ := array(obj.Get("candidates"))
	for _, raw := range cands {
		c := object(raw)
		content := object(c.Get("content"))
		if folded(c) || folded(content) {
			return true
		}
		parts, _ := array(content.Get("parts"))
		for _, p := range parts {
			if foldedPart(object(p)) {
				return true
			}
		}
	}
	return false
}

// foldedPart is foldedKey for one part.
func foldedPart(p jsonx.Object) bool {
	fc := object(get(p, "functionCall"))
	if folded(p) || folded(fc) {
		return true
	}
	partial, _ := array(get(fc, "partialArgs"))
	for _, pa := range partial {
		if folded(object(pa)) {
			return true
		}
	}
	return false
}

// folded reports a key of o that folds onto a Gemini key, or a field o
// holds under both its names.
func folded(o jsonx.Object) bool {
	for _, f := range o {
		if keys.Folds(f.Key) {
			return true
		}
	}
	return twoSpellings(o)
}

// object is raw as an object, or none when it is not one.
func object(raw []byte) jsonx.Object {
	o, err := jsonx.ParseObject(raw)
	if err != nil {
		return nil
	}
	return o
}

// Verbs of the two routes; the model is named in the segment before them.
const (
	verbPlain  = ":generateContent"
	verbStream = ":streamGenerateContent"
)

// array reads an array that may be absent.
func array(raw []byte) ([][]byte, error) {
	if jsonx.IsNull(raw) {
		return nil, nil
	}
	return jsonx.ParseArray(raw)
}
