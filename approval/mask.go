package approval

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// minMasked is the shortest redacted value masked in the user's message:
// shorter ones ("5", "no") would blank ordinary words and say little.
const minMasked = 3

// appendHidden adds the scalar values escalation.redact blanked: those
// where the redacted arguments differ from the original ones. The user's
// message often repeats them ("refund order ord_1"), so the page and the
// admin API mask them there too.
func appendHidden(out []string, orig, redacted json.RawMessage) []string {
	var a, b any
	if json.Unmarshal(orig, &a) != nil {
		return out
	}
	if json.Unmarshal(redacted, &b) != nil {
		return leaves(out, a)
	}
	return diffLeaves(out, a, b)
}

func diffLeaves(out []string, a, b any) []string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return leaves(out, a)
		}
		for k, x := range av {
			out = diffLeaves(out, x, bv[k])
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(bv) != len(av) {
			return leaves(out, a)
		}
		for i := range av {
			out = diffLeaves(out, av[i], bv[i])
		}
		return out
	}
	if a != b {
		return leaves(out, a)
	}
	return out
}

// leaves appends every scalar under v as text.
func leaves(out []string, v any) []string {
	switch x := v.(type) {
	case map[string]any:
		for _, y := range x {
			out = leaves(out, y)
		}
	case []any:
		for _, y := range x {
			out = leaves(out, y)
		}
	case string:
		out = append(out, x)
	case float64:
		out = append(out, strconv.FormatFloat(x, 'f', -1, 64))
	}
	return out
}

// maskValues replaces each hidden value in text with the redaction
// marker, longest first so a value inside another goes with it.
func maskValues(text string, hidden []string) string {
	if text == "" || len(hidden) == 0 {
		return text
	}
	slices.SortFunc(hidden, func(a, b string) int { return len(b) - len(a) })
	for _, h := range hidden {
		if len([]rune(h)) >= minMasked {
			text = strings.ReplaceAll(text, h, "[redacted]")
		}
	}
	return text
}
