package validate

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/catalog"
)

// checkProvenance requires every value at the tool's provenance pointers to
// have appeared earlier in the request: an identifier the model saw can be
// wrong, but one it never saw is invented.
func checkProvenance(dst []Finding, tool *catalog.Tool, args any, cx *Context) []Finding {
	if len(tool.Provenance) == 0 {
		return dst
	}
	for _, ptr := range tool.Provenance {
		v, ok := resolvePointer(args, ptr)
		if !ok {
			// An absent optional argument vouches for nothing and needs nothing.
			continue
		}
		if cx.Evidence == nil || cx.HistoryUpstream {
			dst = append(dst, Unverifiable(ptr))
			continue
		}
		for _, tok := range provenanceTokens(v) {
			if !cx.Evidence.Seen(tok) {
				dst = append(dst, Unvouched(ptr, tok))
				break
			}
		}
	}
	return dst
}

// provenanceTokens lists the scalar values that must be vouched for. Arrays
// are checked element by element; objects and booleans carry no identifier.
func provenanceTokens(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case json.Number:
		return []string{v.String()}
	case []any:
		var out []string
		for _, e := range v {
			switch e := e.(type) {
			case string:
				out = append(out, e)
			case json.Number:
				out = append(out, e.String())
			}
		}
		return out
	}
	return nil
}

// resolvePointer follows an RFC 6901 pointer through decoded JSON.
func resolvePointer(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	if ptr[0] != '/' {
		return nil, false
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch cur := v.(type) {
		case map[string]any:
			next, ok := cur[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(cur) {
				return nil, false
			}
			v = cur[i]
		default:
			return nil, false
		}
	}
	return v, true
}
