package test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/toolgate/toolgate"

// codecs are the per-API packages: they translate a wire format and never
// decide, so they may not see the catalog, the checks or the ladder.
var codecs = []string{"proxy/openaichat", "proxy/anthropic", "proxy/responses", "proxy/gemini"}

// sourceFiles parses the non-test Go files of the package in dir (a path
// from the module root).
func sourceFiles(t *testing.T, dir string) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// imports lists the module's own packages that dir's non-test files import.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	_, files := sourceFiles(t, dir)
	seen := map[string]bool{}
	for _, f := range files {
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if rest, ok := strings.CutPrefix(p, module+"/"); ok {
				seen[rest] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// TestLayering holds the layers ARCHITECTURE.md draws: the neutral values
// depend on nothing of toolgate's, codecs on the neutral values and their
// wire helpers only, the schema engine on no config or judging layer (they
// use it, never the reverse), and the leaves stay leaves.
func TestLayering(t *testing.T) {
	forbidden := map[string][]string{
		"neutral":           {""},
		"proxy/api":         {"catalog", "validate", "recovery", "judge", "proxy/openaichat", "proxy/anthropic", "proxy/responses", "proxy/gemini", "proxy/jsonrpc"},
		"proxy/api/apitest": {"catalog", "validate", "recovery", "judge", "proxy/openaichat", "proxy/anthropic", "proxy/responses", "proxy/gemini", "proxy/jsonrpc"},
		"proxy/openaiwire":  {"catalog", "validate", "recovery", "judge"},
		"proxy/sse":         {""},
		"internal/yamljson": {""},
		"catalog":           {"validate", "recovery", "judge", "proxy"},
		"schema":            {"catalog", "neutral", "validate", "recovery", "judge", "proxy", "approval", "sink", "cmd"},
		"catalog/strict":    {"catalog", "schema", "neutral", "validate", "recovery", "judge", "proxy", "approval", "sink", "cmd"},
		"validate":          {"recovery", "judge", "proxy"},
		"recovery":          {"judge", "proxy"},
		"judge":             {"recovery", "proxy"},
		// MCP's route speaks JSON-RPC through proxy/jsonrpc's wire shapes;
		// the pipeline of package proxy judges, counts and records its
		// calls (proxy/mcpcall.go).
		"proxy/mcp": {"validate", "recovery", "judge", "proxy/openaichat", "proxy/anthropic", "proxy/responses", "proxy/gemini"},
		// proxy/jsonrpc holds MCP's JSON-RPC envelopes and decides
		// nothing. It is no model codec: without proxy/api it cannot
		// implement api.Codec, whose methods name proxy/api's types.
		"proxy/jsonrpc": {"catalog", "validate", "recovery", "judge", "proxy/mcp", "proxy/api", "proxy/sse",
			"proxy/openaichat", "proxy/anthropic", "proxy/responses", "proxy/gemini"},
	}
	for _, c := range codecs {
		forbidden[c] = []string{"catalog", "validate", "recovery", "judge", "proxy/mcp"}
		for _, other := range codecs {
			if other != c {
				forbidden[c] = append(forbidden[c], other)
			}
		}
	}
	for pkg, bans := range forbidden {
		for _, im := range imports(t, pkg) {
			for _, ban := range bans {
				if ban == "" || im == ban || strings.HasPrefix(im, ban+"/") {
					t.Errorf("%s imports %s/%s, which its layer may not", pkg, module, im)
				}
			}
		}
	}
}

// TestFunctionLength keeps every production function of the module, commands
// included, short enough to read at once.
func TestFunctionLength(t *testing.T) {
	const limit = 80
	fset := token.NewFileSet()
	for _, p := range productionGoFiles(t) {
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > limit {
				rel, _ := filepath.Rel("..", p)
				t.Errorf("%s: %s is %d lines; keep functions under %d", rel, fn.Name.Name, n, limit)
			}
		}
	}
}

// TestPackageSize keeps every production package small enough to hold
// one concern: a package past the limit is a sign that two live in it.
func TestPackageSize(t *testing.T) {
	const limit = 4000
	lines := map[string]int{}
	for _, p := range productionGoFiles(t) {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines[filepath.Dir(p)] += strings.Count(string(src), "\n")
	}
	for dir, n := range lines {
		if n > limit {
			rel, _ := filepath.Rel("..", dir)
			t.Errorf("%s holds %d lines of production Go; keep a package under %d by moving a concern out", rel, n, limit)
		}
	}
}

// TestNoSpecReferences keeps production comments pointing at pages a reader
// of the repository can open: the contract document they once cited
// ("SPEC §4") is not in it, and each rule it states is told in docs/.
func TestNoSpecReferences(t *testing.T) {
	spec := regexp.MustCompile(`\bSPEC\b`)
	for _, p := range productionGoFiles(t) {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if spec.MatchString(line) {
				rel, _ := filepath.Rel("..", p)
				t.Errorf("%s:%d cites SPEC; point to the docs/ page that says it: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// productionGoFiles lists the non-test Go files of the main module: it skips
// the test harnesses under test/, testdata and node_modules folders, hidden
// folders, and any folder that is a module of its own (deploy/).
func productionGoFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p == ".." {
				return nil
			}
			if p == filepath.Join("..", "test") || name == "testdata" || name == "node_modules" ||
				strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no production Go files found")
	}
	return files
}

// TestApprovalImports keeps approvals provider-neutral and beneath the
// pipeline that will call them: the approval package sees the neutral
// values and leaf libraries only, and its leaves stay leaves.
func TestApprovalImports(t *testing.T) {
	allowed := map[string][]string{
		"approval":           {"neutral", "internal/storespec", "internal/webhook", "internal/signature"},
		"internal/storespec": nil,
		"internal/webhook":   {"internal/signature"},
	}
	for pkg, ok := range allowed {
		for _, im := range imports(t, pkg) {
			if !slices.Contains(ok, im) {
				t.Errorf("%s imports %s/%s, which its layer may not", pkg, module, im)
			}
		}
	}
}

// TestProxyLeavesImports keeps the proxy's leaves beneath the pipeline
// that imports them: each sees what its job needs and nothing of package
// proxy, of another leaf it has no use for, or of the codecs.
func TestProxyLeavesImports(t *testing.T) {
	allowed := map[string][]string{
		// The route table and the path guard: paths, patterns, refusals.
		"proxy/route": {"neutral"},
		// The upstream client: an upstream's config, calls, headers, keys.
		"proxy/upstream": {"catalog", "internal/httpx"},
		// The observers that need no exchange: metrics, the exporter, the
		// server span and an upstream call's span. The refusal reasons'
		// series come from proxy/route, the call from proxy/upstream, the
		// validator results and the pass outcome from judge and recovery.
		"proxy/observe": {"catalog", "internal/jsonx", "internal/telemetry", "judge", "neutral", "recovery",
			"proxy/route", "proxy/upstream"},
	}
	for pkg, ok := range allowed {
		for _, im := range imports(t, pkg) {
			if !slices.Contains(ok, im) {
				t.Errorf("%s imports %s/%s, which its layer may not", pkg, module, im)
			}
		}
	}
}

// TestProxyRoomsImports keeps proxy/ reading top-down: the server (package
// proxy) wires the model routes' HTTP exchange (proxy/exchange), which
// sequences the pipeline proper (proxy/pipeline), which stands on the
// leaves. Nothing below the exchange imports it, nothing below the server
// imports the server, and the pipeline knows no route table and no
// upstream client: what it decides is the same whoever carries it to the
// client.
func TestProxyRoomsImports(t *testing.T) {
	banned := map[string][]string{
		"proxy/pipeline": {"proxy", "proxy/exchange", "proxy/route", "proxy/upstream", "proxy/sse", "proxy/jsonrpc"},
		"proxy/exchange": {"proxy", "proxy/route", "proxy/mcp", "proxy/jsonrpc"},
	}
	below := []string{"proxy/pipeline", "proxy/route", "proxy/upstream", "proxy/observe", "proxy/mcp",
		"proxy/jsonrpc", "proxy/api", "proxy/sse", "proxy/openaiwire"}
	for _, pkg := range append(below, codecs...) {
		banned[pkg] = append(banned[pkg], "proxy", "proxy/exchange")
	}
	for _, c := range codecs {
		banned["proxy/pipeline"] = append(banned["proxy/pipeline"], c)
		banned["proxy/exchange"] = append(banned["proxy/exchange"], c)
	}
	for pkg, bans := range banned {
		for _, im := range imports(t, pkg) {
			if slices.Contains(bans, im) {
				t.Errorf("%s imports %s/%s: proxy/ reads top-down (server, exchange, pipeline, leaves)", pkg, module, im)
			}
		}
	}
}

// TestPipelineWritesNothing keeps the pipeline proper off the wire: it
// decides and builds replies, and the exchange's writer sends them. No
// file of proxy/pipeline names a response writer or a request.
func TestPipelineWritesNothing(t *testing.T) {
	fset, files := parsedFiles(t, "proxy/pipeline")
	banned := map[string]bool{"ResponseWriter": true, "ResponseController": true, "Flusher": true, "Request": true, "Hijacker": true}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			s, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := s.X.(*ast.Ident); ok && x.Name == "http" && banned[s.Sel.Name] {
				t.Errorf("%s: the pipeline names http.%s; writing belongs to proxy/exchange", fset.Position(s.Pos()), s.Sel.Name)
			}
			return true
		})
	}
}

// TestVerdictFinalWhenDecided keeps the verdict what Decide made it: its
// fields are unexported, Decide is the one function that writes a
// Verdict literal or any of its fields, and no struct of the pipeline or
// the ladder carries a value as any, to be asserted back.
func TestVerdictFinalWhenDecided(t *testing.T) {
	fset, files := parsedFiles(t, "proxy/pipeline")
	fields := map[string]bool{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "Verdict" {
				return true
			}
			for _, fl := range ts.Type.(*ast.StructType).Fields.List {
				for _, name := range fl.Names {
					if name.IsExported() {
						t.Errorf("%s: Verdict.%s is exported; only Decide may set a verdict", fset.Position(name.Pos()), name.Name)
					}
					fields[name.Name] = true
				}
			}
			return false
		})
	}
	if len(fields) == 0 {
		t.Fatal("no Verdict struct in proxy/pipeline")
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || (fn.Recv == nil && fn.Name.Name == "Decide") {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.CompositeLit:
					if id, ok := x.Type.(*ast.Ident); ok && id.Name == "Verdict" {
						t.Errorf("%s: %s makes a Verdict; only Decide does", fset.Position(x.Pos()), funcName(fn))
					}
				case *ast.AssignStmt:
					for _, l := range x.Lhs {
						if sel, ok := l.(*ast.SelectorExpr); ok && fields[sel.Sel.Name] {
							t.Errorf("%s: %s sets a verdict's %s; only Decide does", fset.Position(l.Pos()), funcName(fn), sel.Sel.Name)
						}
					}
				}
				return true
			})
		}
	}
	for _, dir := range []string{"proxy/pipeline", "recovery"} {
		fset, files := parsedFiles(t, dir)
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				st, ok := n.(*ast.StructType)
				if !ok {
					return true
				}
				for _, fl := range st.Fields.List {
					if id, ok := fl.Type.(*ast.Ident); ok && id.Name == "any" {
						t.Errorf("%s: a field of type any; give it its type", fset.Position(fl.Pos()))
					}
					if it, ok := fl.Type.(*ast.InterfaceType); ok && len(it.Methods.List) == 0 {
						t.Errorf("%s: a field of type interface{}; give it its type", fset.Position(fl.Pos()))
					}
				}
				return true
			})
		}
	}
}

// parsedFiles parses the non-test Go files of dir whole, bodies included.
func parsedFiles(t *testing.T, dir string) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// TestCodecsDecideNoTruncation keeps the truncation rule out of the codecs:
// a codec reports the provider's stop reason (neutral.Stop), and whether a
// call was cut off is decided from it in one place. No codec may set,
// name as a literal key, or read the decided Truncated.
func TestCodecsDecideNoTruncation(t *testing.T) {
	for _, dir := range codecs {
		fset, files := parsedFiles(t, dir)
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				var name *ast.Ident
				switch x := n.(type) {
				case *ast.SelectorExpr:
					name = x.Sel
				case *ast.KeyValueExpr:
					name, _ = x.Key.(*ast.Ident)
				}
				if name != nil && name.Name == "Truncated" {
					t.Errorf("%s: a codec touches the decided Truncated; report neutral.Stop instead", fset.Position(name.Pos()))
				}
				return true
			})
		}
	}
}

// TestNoCodecAssertions keeps the codec contract whole: the pipeline calls
// what api.Codec and api.Stream declare and never asks a codec or a
// stream for an optional interface of package api.
func TestNoCodecAssertions(t *testing.T) {
	for _, dir := range []string{"proxy", "proxy/exchange", "proxy/pipeline"} {
		noCodecAssertions(t, dir)
	}
}

// noCodecAssertions fails on a type assertion or switch on a type of
// package api in dir.
func noCodecAssertions(t *testing.T, dir string) {
	t.Helper()
	fset, files := parsedFiles(t, dir)
	for _, f := range files {
		apiName := ""
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == module+"/proxy/api" {
				apiName = "api"
				if im.Name != nil {
					apiName = im.Name.Name
				}
			}
		}
		if apiName == "" {
			continue
		}
		fromAPI := func(e ast.Expr) bool {
			if s, ok := e.(*ast.SelectorExpr); ok {
				x, ok := s.X.(*ast.Ident)
				return ok && x.Name == apiName
			}
			return false
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.TypeAssertExpr:
				if x.Type != nil && fromAPI(x.Type) {
					t.Errorf("%s: a type assertion on a type of package api; make it part of the codec contract", fset.Position(x.Pos()))
				}
			case *ast.TypeSwitchStmt:
				for _, cl := range x.Body.List {
					for _, e := range cl.(*ast.CaseClause).List {
						if fromAPI(e) {
							t.Errorf("%s: a type switch on a type of package api; make it part of the codec contract", fset.Position(e.Pos()))
						}
					}
				}
			}
			return true
		})
	}
}

// TestRecoveryHasNoHTTP keeps the ladder provider- and transport-neutral:
// what an HTTP upstream answered is the pipeline's, carried through
// recovery opaquely.
func TestRecoveryHasNoHTTP(t *testing.T) {
	_, files := sourceFiles(t, "recovery")
	for _, f := range files {
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == "net/http" || strings.HasPrefix(p, "net/http/") {
				t.Errorf("recovery imports %s; HTTP belongs to the pipeline", p)
			}
		}
	}
}

// TestFindingsMadeInOnePlace keeps each finding code's wording in one
// constructor of validate/findings.go: no other non-test file writes a
// Finding literal.
func TestFindingsMadeInOnePlace(t *testing.T) {
	dirs := append([]string{"validate", "judge", "recovery", "proxy", "proxy/exchange", "proxy/pipeline", "proxy/mcp", "sink", "approval"}, codecs...)
	for _, dir := range dirs {
		fset, files := parsedFiles(t, dir)
		for _, f := range files {
			if dir == "validate" && filepath.Base(fset.Position(f.Pos()).Filename) == "findings.go" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				cl, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				if findingType(cl.Type, dir) {
					t.Errorf("%s: a Finding literal; use a constructor of validate/findings.go", fset.Position(cl.Pos()))
				}
				// The elements of a []Finding literal elide their type.
				if at, ok := cl.Type.(*ast.ArrayType); ok && findingType(at.Elt, dir) {
					for _, e := range cl.Elts {
						if _, lit := e.(*ast.CompositeLit); lit {
							t.Errorf("%s: a Finding literal; use a constructor of validate/findings.go", fset.Position(e.Pos()))
						}
					}
				}
				return true
			})
		}
	}
}

// findingType reports the type validate.Finding (Finding inside validate).
func findingType(e ast.Expr, dir string) bool {
	switch x := e.(type) {
	case *ast.Ident:
		return dir == "validate" && x.Name == "Finding"
	case *ast.SelectorExpr:
		pkg, ok := x.X.(*ast.Ident)
		return ok && pkg.Name == "validate" && x.Sel.Name == "Finding"
	}
	return false
}

// streamWriters are the Stream methods that write to the client; each
// takes the pipeline's api.Sent.
var streamWriters = []string{"Encode", "ErrorEvent", "UpstreamError"}

// TestStreamContractKeepsPipelineState keeps what went out to the client
// the pipeline's: the Stream contract asks a codec nothing only the
// pipeline knows (no Committed), and every method that writes is given
// the pipeline's account of what was sent instead of keeping its own.
func TestStreamContractKeepsPipelineState(t *testing.T) {
	fset, files := parsedFiles(t, "proxy/api")
	var stream *ast.InterfaceType
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "Stream" {
				stream, _ = ts.Type.(*ast.InterfaceType)
			}
			return stream == nil
		})
	}
	if stream == nil {
		t.Fatal("no Stream interface in proxy/api")
	}
	takesSent := map[string]bool{}
	for _, m := range stream.Methods.List {
		ft, ok := m.Type.(*ast.FuncType)
		if !ok || len(m.Names) == 0 {
			continue
		}
		name := m.Names[0].Name
		if name == "Committed" {
			t.Errorf("%s: Stream.Committed asks a codec what only the pipeline knows", fset.Position(m.Pos()))
		}
		for _, p := range ft.Params.List {
			if id, ok := p.Type.(*ast.Ident); ok && id.Name == "Sent" {
				takesSent[name] = true
			}
		}
	}
	for _, w := range streamWriters {
		if !takesSent[w] {
			t.Errorf("Stream.%s does not take the pipeline's Sent", w)
		}
	}
}

// TestCodecWritersKeepNoCopy keeps codecs from learning what was written:
// a stream's writers read the Sent they are given and never record
// anything in the stream (a sequence number used, a bracket sent).
func TestCodecWritersKeepNoCopy(t *testing.T) {
	for _, dir := range codecs {
		fset, files := parsedFiles(t, dir)
		for _, f := range files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv == nil || fn.Body == nil || !slices.Contains(streamWriters, fn.Name.Name) {
					continue
				}
				recv := fn.Recv.List[0].Names
				if len(recv) == 0 {
					continue
				}
				for _, pos := range receiverWrites(fn.Body, recv[0].Name) {
					t.Errorf("%s: %s records in its stream what it wrote; the pipeline's Sent says it", fset.Position(pos), fn.Name.Name)
				}
			}
		}
	}
}

// receiverWrites finds the assignments and increments in body whose
// target is a field of the receiver recv.
func receiverWrites(body *ast.BlockStmt, recv string) []token.Pos {
	var out []token.Pos
	onRecv := func(e ast.Expr) bool {
		for {
			switch x := e.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok {
					return id.Name == recv
				}
				e = x.X
			case *ast.IndexExpr:
				e = x.X
			default:
				return false
			}
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.AssignStmt:
			for _, l := range x.Lhs {
				if onRecv(l) {
					out = append(out, l.Pos())
				}
			}
		case *ast.IncDecStmt:
			if onRecv(x.X) {
				out = append(out, x.Pos())
			}
		}
		return true
	})
	return out
}

// TestOneWriter keeps a judged route's answer in one place: the pipeline
// builds a reply value and proxy/exchange's (*exchange).write alone
// concludes the request, sets the outcome headers, writes the status and
// the body and reports. WriteHeader is called elsewhere only where no
// exchange exists (a route refusal, a failure before the route is known),
// by the stream writer, whose headers go out with a stream's first byte,
// and by the wrapper that notes it.
func TestOneWriter(t *testing.T) {
	checkWriters(t, "proxy/exchange", map[string]map[string]bool{
		"WriteHeader": {"Send": true, "streamWriter.writeLocked": true, "streamWriter.start": true, "Writer.WriteHeader": true},
		"conclude":    {"exchange.write": true},
		"report":      {"exchange.write": true},
	})
	// The server writes only the refusals made before an exchange exists.
	checkWriters(t, "proxy", map[string]map[string]bool{
		"WriteHeader": {"writeFailure": true, "Server.refuse": true},
		"conclude":    {},
		"report":      {},
	})
	// An MCP route sends what it answers whole through the pipeline's
	// writer (Pipeline.Write); it writes a status itself only to open a
	// stream it relays or asks a person on, to relay a server's answer
	// as it arrives, and to refuse a request before it is served.
	checkWriters(t, "proxy/mcp", map[string]map[string]bool{
		"WriteHeader": {"clientRequest.forward": true, "clientRequest.forwardNonPost": true, "clientRequest.confirm": true,
			"clientRequest.passthrough": true, "Route.rebinding": true, "statusWriter.WriteHeader": true},
	})
}

// checkWriters fails on a call in dir's functions to a name of allowed
// from a function the name does not allow.
func checkWriters(t *testing.T, dir string, allowed map[string]map[string]bool) {
	t.Helper()
	fset, files := parsedFiles(t, dir)
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := funcName(fn)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				s, ok := c.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if only, ok := allowed[s.Sel.Name]; ok && !only[name] {
					t.Errorf("%s: %s calls %s; build a reply and let the one writer send it",
						fset.Position(c.Pos()), name, s.Sel.Name)
				}
				return true
			})
		}
	}
}

// funcName is a function's name, with its receiver's type for a method
// ("exchange.write").
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
