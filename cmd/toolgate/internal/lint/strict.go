package lint

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/catalog/strict"
)

// strictAPIs names the routes each strict subset applies to.
var strictAPIs = map[strict.Provider]string{
	strict.OpenAI:    "chat, responses",
	strict.Anthropic: "messages",
	strict.Gemini:    "gemini; the mode is set only when every offered declaration fits",
}

// Strict reports, per provider, which catalog tools fit its strict subset
// (docs/strict.md, "What fits") and, for each of the others, the first keyword or shape that
// keeps it out. The lines are in a stable order, ready to print.
func Strict(s *catalog.Snapshot) []string {
	mode := catalog.StrictOff
	if s.Config != nil {
		mode = s.Config.Catalog.Strict
	}
	out := []string{fmt.Sprintf("strict subsets (catalog.strict: %s; auto marks the tools that fit):", mode)}
	if len(s.Names) == 0 {
		return append(out, "  no catalog tools; with auto, each request's own tools are judged as they come")
	}
	for _, p := range strict.Providers {
		var fit, unfit []string
		for _, n := range s.Names {
			f := strict.Check(p, s.Tools[n].Parameters)
			if f.OK {
				fit = append(fit, n)
				continue
			}
			unfit = append(unfit, fmt.Sprintf("    %s: %s", n, f.Reason))
		}
		out = append(out, fmt.Sprintf("  %s (%s):", p, strictAPIs[p]))
		if len(fit) > 0 {
			out = append(out, "    fit: "+strings.Join(fit, ", "))
		}
		out = append(out, unfit...)
	}
	return out
}
