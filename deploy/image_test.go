package deploy_test

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

const (
	dockerfilePath = "../Dockerfile"
	repoRoot       = ".."
	testVersion    = "v0.0.0-deploytest.1"
)

// stage is one FROM … up to the next FROM.
type stage struct {
	image, name string
	platform    string
	nodes       []*parser.Node
}

func (s *stage) find(instr string) []*parser.Node {
	var out []*parser.Node
	for _, n := range s.nodes {
		if strings.EqualFold(n.Value, instr) {
			out = append(out, n)
		}
	}
	return out
}

func args(n *parser.Node) []string {
	var out []string
	for a := n.Next; a != nil; a = a.Next {
		out = append(out, a.Value)
	}
	return out
}

// parseDockerfile parses the Dockerfile with BuildKit's own parser, the one
// `docker build` uses, and splits it into stages.
func parseDockerfile(t *testing.T) []*stage {
	t.Helper()
	f, err := os.Open(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile: %s (line %d)", w.Short, w.Location.Start.Line)
	}
	var stages []*stage
	for _, n := range res.AST.Children {
		if strings.EqualFold(n.Value, "from") {
			a := args(n)
			s := &stage{image: a[0]}
			if len(a) == 3 && strings.EqualFold(a[1], "as") {
				s.name = a[2]
			}
			for _, fl := range n.Flags {
				if v, ok := strings.CutPrefix(fl, "--platform="); ok {
					s.platform = v
				}
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if !strings.EqualFold(n.Value, "arg") {
				t.Fatalf("Dockerfile: %s before the first FROM", n.Value)
			}
			continue
		}
		stages[len(stages)-1].nodes = append(stages[len(stages)-1].nodes, n)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and a final stage", len(stages))
	}
	return stages
}

// shellWords splits a shell command line into words the way sh would for
// the simple commands used here: quotes removed, $VAR and ${VAR} expanded
// from vars outside single quotes, and the operators ; && || | as words of
// their own. An unknown variable is an error, so a renamed ARG is noticed.
func shellWords(line string, vars map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	expand := func(i int) (int, error) {
		// line[i] == '$'
		j := i + 1
		var name string
		if j < len(line) && line[j] == '{' {
			end := strings.IndexByte(line[j:], '}')
			if end < 0 {
				return 0, fmt.Errorf("unclosed ${ in %q", line)
			}
			name = line[j+1 : j+end]
			j += end + 1
		} else {
			k := j
			for k < len(line) && (line[k] == '_' || 'A' <= line[k] && line[k] <= 'Z' || 'a' <= line[k] && line[k] <= 'z' || '0' <= line[k] && line[k] <= '9') {
				k++
			}
			name = line[j:k]
			j = k
		}
		v, ok := vars[name]
		if !ok {
			return 0, fmt.Errorf("variable %q is not known to the test", name)
		}
		cur.WriteString(v)
		inWord = true
		return j, nil
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			flush()
			i++
		case c == '\\' && i+1 < len(line):
			cur.WriteByte(line[i+1])
			inWord = true
			i += 2
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ' in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			inWord = true
			i += end + 2
		case c == '"':
			inWord = true
			i++
			for {
				if i >= len(line) {
					return nil, fmt.Errorf("unclosed \" in %q", line)
				}
				if line[i] == '"' {
					i++
					break
				}
				if line[i] == '$' {
					j, err := expand(i)
					if err != nil {
						return nil, err
					}
					i = j
					continue
				}
				if line[i] == '\\' && i+1 < len(line) && strings.ContainsRune(`"\$`, rune(line[i+1])) {
					i++
				}
				cur.WriteByte(line[i])
				i++
			}
		case c == '$':
			j, err := expand(i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == ';' || c == '&' || c == '|':
			flush()
			op := string(c)
			if i+1 < len(line) && line[i+1] == c {
				op += string(c)
			}
			words = append(words, op)
			i += len(op)
		default:
			cur.WriteByte(c)
			inWord = true
			i++
		}
	}
	flush()
	return words, nil
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// goBuild finds the `go build` command among words: the variables assigned
// just before it, and its arguments.
func goBuild(words []string) (env map[string]string, buildArgs []string, ok bool) {
	isOp := func(w string) bool { return w == ";" || w == "&&" || w == "||" || w == "|" || w == "&" }
	for i := 0; i+1 < len(words); i++ {
		if words[i] != "go" || words[i+1] != "build" {
			continue
		}
		env = map[string]string{}
		for j := i - 1; j >= 0 && !isOp(words[j]); j-- {
			if !assignment.MatchString(words[j]) {
				return nil, nil, false // "go" was an argument, not the command
			}
			k, v, _ := strings.Cut(words[j], "=")
			env[k] = v
		}
		for j := i + 2; j < len(words) && !isOp(words[j]); j++ {
			buildArgs = append(buildArgs, words[j])
		}
		return env, buildArgs, true
	}
	return nil, nil, false
}

// withoutOutput drops -o PATH from build arguments and returns PATH.
func withoutOutput(a []string) ([]string, string) {
	var out []string
	path := ""
	for i := 0; i < len(a); i++ {
		if a[i] == "-o" && i+1 < len(a) {
			path = a[i+1]
			i++
			continue
		}
		if v, ok := strings.CutPrefix(a[i], "-o="); ok {
			path = v
			continue
		}
		out = append(out, a[i])
	}
	return out, path
}

// dockerBuild is the Dockerfile's go build command with the build
// arguments set as given: the variables it assigns and its arguments.
func dockerBuild(t *testing.T, stages []*stage, buildArgs map[string]string) (*stage, map[string]string, []string) {
	t.Helper()
	for _, s := range stages {
		for _, run := range s.find("run") {
			a := args(run)
			if len(a) != 1 || run.Attributes["json"] {
				continue
			}
			words, err := shellWords(a[0], buildArgs)
			if err != nil {
				t.Fatalf("Dockerfile line %d: %v", run.StartLine, err)
			}
			if env, ba, ok := goBuild(words); ok {
				return s, env, ba
			}
		}
	}
	t.Fatal("Dockerfile: no RUN with go build")
	return nil, nil, nil
}

var dockerVars = map[string]string{"VERSION": testVersion, "TARGETOS": "", "TARGETARCH": ""}

func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t)
	buildStage, env, buildArgs := dockerBuild(t, stages, dockerVars)
	final := stages[len(stages)-1]

	if !strings.HasPrefix(buildStage.image, "docker.io/library/golang:1.26") {
		t.Errorf("build stage FROM %s, want docker.io/library/golang:1.26 (the Go toolchain go.mod is built with, named in full)", buildStage.image)
	}
	if buildStage == final {
		t.Fatal("the binary is built in the final stage: want a multi-stage build")
	}
	if final.image != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("final FROM %s, want gcr.io/distroless/static-debian12:nonroot", final.image)
	}

	// Build flags.
	if env["CGO_ENABLED"] != "0" {
		t.Errorf("go build runs with CGO_ENABLED=%q, want 0 (a static binary for distroless/static)", env["CGO_ENABLED"])
	}
	if !slices.Contains(buildArgs, "-trimpath") {
		t.Errorf("go build %q lacks -trimpath", buildArgs)
	}
	ldflags := ""
	for i, a := range buildArgs {
		if a == "-ldflags" && i+1 < len(buildArgs) {
			ldflags = buildArgs[i+1]
		}
	}
	if ldflags != "-s -w -X main.version="+testVersion {
		t.Errorf("go build -ldflags %q, want \"-s -w -X main.version=${VERSION}\"", ldflags)
	}
	if !slices.ContainsFunc(buildStage.find("arg"), func(n *parser.Node) bool {
		a := args(n)
		return len(a) == 1 && (a[0] == "VERSION" || strings.HasPrefix(a[0], "VERSION="))
	}) {
		t.Error("the build stage does not declare ARG VERSION")
	}
	// go.mod and go.sum are copied and downloaded before the sources, so
	// the module download is a layer of its own.
	var order []string
	for _, n := range buildStage.nodes {
		a := strings.Join(args(n), " ")
		switch {
		case strings.EqualFold(n.Value, "copy") && strings.Contains(a, "go.mod") && strings.Contains(a, "go.sum"):
			order = append(order, "copy-mod")
		case strings.EqualFold(n.Value, "run") && strings.Contains(a, "go mod download"):
			order = append(order, "download")
		case strings.EqualFold(n.Value, "copy") && a == ". .":
			order = append(order, "copy-all")
		}
	}
	if !reflect.DeepEqual(order, []string{"copy-mod", "download", "copy-all"}) {
		t.Errorf("build stage order %v, want go.mod/go.sum copied, go mod download, then the sources", order)
	}

	// The final stage.
	_, out := withoutOutput(buildArgs)
	copied := false
	for _, n := range final.find("copy") {
		a := args(n)
		if slices.Contains(n.Flags, "--from="+buildStage.name) && len(a) == 2 && a[0] == out && a[1] == "/toolgate" {
			copied = true
		}
	}
	if !copied {
		t.Errorf("final stage does not COPY --from=%s %s /toolgate", buildStage.name, out)
	}
	if runs := final.find("run"); len(runs) > 0 {
		t.Errorf("final stage has RUN on line %d; distroless has no shell", runs[0].StartLine)
	}
	users := final.find("user")
	if len(users) != 1 {
		t.Fatalf("final stage has %d USER instructions, want 1", len(users))
	}
	user := args(users[0])[0]
	uid, gid, _ := strings.Cut(user, ":")
	u, err1 := strconv.Atoi(uid)
	g, err2 := strconv.Atoi(gid)
	if err1 != nil || err2 != nil || u == 0 || g == 0 {
		t.Errorf("USER %q, want numeric uid:gid, not root (runAsNonRoot can only verify a numeric user)", user)
	} else if u != nonRootUID {
		t.Errorf("USER %q, but the manifests run as %d", user, nonRootUID)
	}
	exposed := map[string]bool{}
	for _, n := range final.find("expose") {
		for _, p := range args(n) {
			p, _, _ = strings.Cut(p, "/")
			exposed[p] = true
		}
	}
	for _, p := range []string{"8080", "9091"} {
		if !exposed[p] {
			t.Errorf("final stage does not EXPOSE %s", p)
		}
	}
	execForm := func(instr string, want []string) {
		ns := final.find(instr)
		if len(ns) != 1 {
			t.Errorf("final stage has %d %s, want 1", len(ns), instr)
			return
		}
		if !ns[0].Attributes["json"] {
			t.Errorf("%s is in shell form; the image has no shell", instr)
		}
		if got := args(ns[0]); !reflect.DeepEqual(got, want) {
			t.Errorf("%s %q, want %q", instr, got, want)
		}
	}
	execForm("entrypoint", []string{"/toolgate"})
	execForm("cmd", []string{"serve", "--config", configMount + "/" + configKey})
}

// TestDockerfileMatchesMakeBuild keeps the image's go build and `make
// build` the same, flag for flag, so the binary a developer tests is the
// one that ships.
func TestDockerfileMatchesMakeBuild(t *testing.T) {
	makePath, err := exec.LookPath("make")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("make not found")
		}
		t.Skip("make not found")
	}
	cmd := exec.Command(makePath, "-s", "-n", "build", "GO=go", "VERSION="+testVersion)
	cmd.Dir = repoRoot
	// Flags of a `make test` this may run under must not reach the child.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "MAKEFLAGS=") || strings.HasPrefix(e, "MFLAGS=") || strings.HasPrefix(e, "MAKELEVEL=")
	})
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n build: %v", err)
	}
	var makeEnv map[string]string
	var makeArgs []string
	found := false
	for _, line := range strings.Split(string(outb), "\n") {
		words, err := shellWords(line, map[string]string{})
		if err != nil {
			continue
		}
		if makeEnv, makeArgs, found = goBuild(words); found {
			break
		}
	}
	if !found {
		t.Fatalf("make -n build printed no go build:\n%s", outb)
	}

	_, dockerEnv, dockerArgs := dockerBuild(t, parseDockerfile(t), dockerVars)
	// The image cross-compiles for the platform buildx asks for; `make
	// build` builds for the host. Everything else must match.
	delete(dockerEnv, "GOOS")
	delete(dockerEnv, "GOARCH")
	if !reflect.DeepEqual(dockerEnv, makeEnv) {
		t.Errorf("environment of go build: Dockerfile %v, Makefile %v", dockerEnv, makeEnv)
	}
	da, _ := withoutOutput(dockerArgs)
	ma, _ := withoutOutput(makeArgs)
	if !reflect.DeepEqual(da, ma) {
		t.Errorf("go build arguments differ (output path aside):\nDockerfile: %q\nMakefile:   %q", da, ma)
	}
}

// TestImageBinary builds toolgate with the Dockerfile's own go build line
// and checks what the distroless/static image relies on: no dynamic loader,
// no shared libraries, symbols stripped, build paths trimmed, and the
// version stamped.
func TestImageBinary(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("checks a Linux ELF binary")
	}
	if testing.Short() {
		t.Skip("builds toolgate")
	}
	_, env, buildArgs := dockerBuild(t, parseDockerfile(t), dockerVars)
	bin := filepath.Join(t.TempDir(), "toolgate")
	buildArgs, _ = withoutOutput(buildArgs)
	// -o goes before the package argument.
	buildArgs = append(buildArgs[:len(buildArgs)-1:len(buildArgs)-1], "-o", bin, buildArgs[len(buildArgs)-1])
	cmd := exec.Command("go", append([]string{"build"}, buildArgs...)...)
	cmd.Dir = repoRoot
	cmd.Env = os.Environ()
	for k, v := range env {
		if v != "" { // GOOS/GOARCH from empty TARGET* args: the host's
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %q: %v\n%s", buildArgs, err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("binary has a PT_INTERP header: it needs a dynamic loader, which distroless/static lacks")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("binary needs shared libraries (DT_NEEDED): %v", libs)
	}
	if _, err := f.Symbols(); !errors.Is(err, elf.ErrNoSymbols) {
		t.Errorf("binary still has a symbol table (-s not applied): %v", err)
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(abs+string(filepath.Separator))) {
		t.Errorf("binary contains the build path %s (-trimpath not applied)", abs)
	}

	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("toolgate version: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "toolgate "+testVersion; got != want {
		t.Errorf("toolgate version printed %q, want %q", got, want)
	}
}

func TestShellWords(t *testing.T) {
	words, err := shellWords(`A=1 B=${X}  go build -ldflags "-s -X m.v=${X}" -o '/o ut' ./c && echo "$X"`, map[string]string{"X": "x y"})
	if err != nil {
		t.Fatal(err)
	}
	// Unlike sh, an unquoted ${X} is not split again: no build argument
	// here holds a space.
	want := []string{"A=1", "B=x y", "go", "build", "-ldflags", "-s -X m.v=x y", "-o", "/o ut", "./c", "&&", "echo", "x y"}
	if !reflect.DeepEqual(words, want) {
		t.Errorf("got %q\nwant %q", words, want)
	}
	if _, err := shellWords(`echo ${NOPE}`, nil); err == nil {
		t.Error("an unknown variable did not fail")
	}
}
