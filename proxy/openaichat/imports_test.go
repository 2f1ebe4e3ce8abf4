package openaichat

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The codec translates and never decides: of toolgate it may import only
// the neutral values, the contract, the SSE reader, the JSON helpers and
// what both OpenAI APIs share.
func TestImportsOnlyTheContract(t *testing.T) {
	allowed := map[string]bool{
		"github.com/toolgate/toolgate/neutral":          true,
		"github.com/toolgate/toolgate/proxy/api":        true,
		"github.com/toolgate/toolgate/proxy/sse":        true,
		"github.com/toolgate/toolgate/internal/jsonx":   true,
		"github.com/toolgate/toolgate/proxy/openaiwire": true,
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fs := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/toolgate/toolgate/") && !allowed[path] {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}
