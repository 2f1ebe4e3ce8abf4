package api

import (
	"strconv"
	"strings"
)

// StrictTool is one function tool of a request as strict mode sees it
// (docs/strict.md): its name, its parameter schema as JSON Schema (Gemini's
// OpenAPI form translated), and whether the client decided the flag
// itself (a strict key with a boolean; for Gemini, a function calling
// mode of its own).
type StrictTool struct {
	Name   string
	Schema []byte
	Client bool
}

// StrictMarker is the part of the Codec contract that reads and writes the
// strict flag of the provider, which constrains its decoding to a tool's
// schema.
type StrictMarker interface {
	// StrictTools lists the request's function tools in request order.
	StrictTools() []StrictTool
	// StrictPerRequest reports a flag that is one for the whole request
	// (Gemini's VALIDATED mode) rather than one per tool.
	StrictPerRequest() bool
	// MarkStrict returns the request with the flag set on the named tools
	// (for a per-request flag: set once), every other byte as the client
	// sent it. The codec's request is that one from then on, so re-queries
	// carry the same marks.
	MarkStrict(names []string) ([]byte, error)
	// UpstreamError reads an upstream error body in the provider's error
	// shape: its message (and parameter path, where the API gives one),
	// and the tool it points at when it names one of the request's tools.
	UpstreamError(body []byte) (message, tool string)
}

// ToolNamed finds the tool an upstream error message points at: by its
// place in the request's tools array ("tools[2]", "tools.2"), or by its
// name in quotes. names are the tools array's entries in order, "" for an
// entry that is not a function tool. It returns "" when the text names
// none.
func ToolNamed(text string, names []string) string {
	for _, open := range []string{"tools[", "tools."} {
		for i := 0; ; {
			j := strings.Index(text[i:], open)
			if j < 0 {
				break
			}
			i += j + len(open)
			k := i
			for k < len(text) && text[k] >= '0' && text[k] <= '9' {
				k++
			}
			if n, err := strconv.Atoi(text[i:k]); err == nil && n < len(names) && names[n] != "" {
				return names[n]
			}
		}
	}
	for _, n := range names {
		if n != "" && (strings.Contains(text, "'"+n+"'") || strings.Contains(text, `"`+n+`"`)) {
			return n
		}
	}
	return ""
}
