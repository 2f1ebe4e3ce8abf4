package catalog

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/secrets"
)

// Problem is one thing wrong with a configuration, tied to the field it is
// about so that an operator can find it without reading code.
type Problem struct {
	// Path names the field, e.g. "upstreams[0].url"; empty for the file as
	// a whole.
	Path string
	// Line is the line in the config file, or 0 when unknown (a field that
	// took its default, or a Config built in code).
	Line int
	// Message says what is wrong.
	Message string
}

// String renders the problem as "path: line N: message".
func (p Problem) String() string {
	var b strings.Builder
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	if p.Line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(p.Line))
		b.WriteString(": ")
	}
	b.WriteString(secrets.WithoutUserinfo(p.Message))
	return b.String()
}

// ConfigError is a rejected configuration. It lists every problem found, not
// only the first, so one edit can fix them all.
type ConfigError struct {
	// File is the config file's name as given to Parse or Load.
	File     string
	Problems []Problem
}

// Error lists the problems one per line.
func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("invalid config")
	if e.File != "" {
		b.WriteString(" ")
		b.WriteString(e.File)
	}
	b.WriteString(":")
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// problems collects Problems and ties them to lines of the source file when
// the Config came from Parse.
type problems struct {
	src  *source
	list []Problem
}

func (ps *problems) add(path, format string, args ...any) {
	ps.list = append(ps.list, Problem{Path: path, Line: ps.src.lineOf(path), Message: fmt.Sprintf(format, args...)})
}

// err returns nil when nothing was found, else a *ConfigError. It returns
// the error interface so that a nil result is a true nil.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	e := &ConfigError{Problems: ps.list}
	if ps.src != nil {
		e.File = ps.src.name
	}
	return e
}

// identKey matches keys that read well after a dot; any other key is
// quoted in brackets so that a path stays unambiguous.
var identKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// fieldPath appends a mapping key to a path.
func fieldPath(parent, key string) string {
	if identKey.MatchString(key) {
		if parent == "" {
			return key
		}
		return parent + "." + key
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

// indexPath appends a list index to a path.
func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// parentPath drops the last element of a path, or returns "" at the top.
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if strings.HasSuffix(p, "\"]") {
			// A quoted key: find the opening `["` whose quoted string runs
			// to the end.
			for i := strings.LastIndex(p, "[\""); i >= 0; i = strings.LastIndex(p[:i], "[\"") {
				if _, err := strconv.Unquote(p[i+1 : len(p)-1]); err == nil {
					return p[:i]
				}
			}
			return ""
		}
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
		return ""
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// source remembers where each field of a parsed file sits.
type source struct {
	name string
	// lines maps a field path to the line of its key (or list item).
	lines map[string]int
	// byLine lists the nodes on each line, in document order, so that the
	// yaml decoder's line-only messages can be tied to a field.
	byLine map[int][]placed
}

// placed is one node of the file with the path it belongs to.
type placed struct {
	path string
	node *yaml.Node
	key  bool
}

func newSource(name string, root *yaml.Node) *source {
	s := &source{name: name, lines: map[string]int{}, byLine: map[int][]placed{}}
	if root != nil {
		s.walk(root, "")
	}
	return s
}

func (s *source) place(n *yaml.Node, path string, key bool) {
	s.byLine[n.Line] = append(s.byLine[n.Line], placed{path: path, node: n, key: key})
	if _, ok := s.lines[path]; !ok && path != "" {
		s.lines[path] = n.Line
	}
}

func (s *source) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			s.walk(c, path)
		}
	case yaml.MappingNode:
		s.place(n, path, false)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			child := fieldPath(path, k.Value)
			s.place(k, child, true)
			s.walk(n.Content[i+1], child)
		}
	case yaml.SequenceNode:
		s.place(n, path, false)
		for i, c := range n.Content {
			s.walk(c, indexPath(path, i))
		}
	default:
		s.place(n, path, false)
	}
}

// lineOf returns the line of path, or of its nearest ancestor written in the
// file (a defaulted field has no line of its own), or 0.
func (s *source) lineOf(path string) int {
	if s == nil {
		return 0
	}
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := s.lines[p]; ok {
			return l
		}
	}
	return 0
}

// The yaml decoder's messages carry a line and nothing else. These are the
// shapes it produces, plus the one nodeError produces.
var (
	reOwn      = regexp.MustCompile(`^line (\d+) column (\d+): (.*)$`)
	reUnknown  = regexp.MustCompile(`^line (\d+): field (.*) not found in type .*$`)
	reTwice    = regexp.MustCompile(`^line (\d+): field (.*) already set in type .*$`)
	reDupKey   = regexp.MustCompile(`^line (\d+): mapping key "(.*)" already defined at line (\d+)$`)
	reMismatch = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.*)$")
	reLine     = regexp.MustCompile(`^line (\d+): (.*)$`)
)

// translate turns one message of a *yaml.TypeError into a Problem naming
// the field. Where a message fits several nodes of a line (flow style), the
// first candidate is taken: the line is still right. scope is the part of
// the config the decoder left unread because of it ("" for all of it).
func (s *source) translate(msg string) (p Problem, scope string) {
	p = s.problemFor(msg)
	scope = p.Path
	if reDupKey.MatchString(msg) {
		// The decoder skips a whole mapping with a repeated key.
		scope = parentPath(p.Path)
	}
	if strings.HasSuffix(scope, "]") {
		// A list drops an element it could not decode, which shifts the
		// rest: nothing about that list can be checked.
		scope = parentPath(scope)
	}
	return p, scope
}

func (s *source) problemFor(msg string) Problem {
	if m := reOwn.FindStringSubmatch(msg); m != nil {
		line, col := atoi(m[1]), atoi(m[2])
		for _, p := range s.byLine[line] {
			if p.node.Column == col && !p.key {
				return Problem{Path: p.path, Line: line, Message: m[3]}
			}
		}
		return Problem{Line: line, Message: m[3]}
	}
	if m := reUnknown.FindStringSubmatch(msg); m != nil {
		line := atoi(m[1])
		return Problem{Path: s.keyPath(line, m[2], false), Line: line, Message: "unknown field " + strconv.Quote(m[2])}
	}
	if m := reTwice.FindStringSubmatch(msg); m != nil {
		line := atoi(m[1])
		return Problem{Path: s.keyPath(line, m[2], true), Line: line, Message: "field " + strconv.Quote(m[2]) + " is set twice"}
	}
	if m := reDupKey.FindStringSubmatch(msg); m != nil {
		line := atoi(m[1])
		return Problem{Path: s.keyPath(line, m[2], true), Line: line, Message: "key " + strconv.Quote(m[2]) + " is set twice (first at line " + m[3] + ")"}
	}
	if m := reMismatch.FindStringSubmatch(msg); m != nil {
		line, tag, val, into := atoi(m[1]), m[2], m[3], m[4]
		return Problem{Path: s.valuePath(line, tag, val), Line: line, Message: "expected " + typeWord(into) + ", got " + tagWord(tag, val)}
	}
	if m := reLine.FindStringSubmatch(msg); m != nil {
		line := atoi(m[1])
		var path string
		for _, p := range s.byLine[line] {
			if p.key {
				path = p.path
				break
			}
		}
		return Problem{Path: path, Line: line, Message: m[2]}
	}
	return Problem{Message: msg}
}

func (s *source) keyPath(line int, name string, last bool) string {
	path := ""
	for _, p := range s.byLine[line] {
		if p.key && p.node.Value == name {
			path = p.path
			if !last {
				break
			}
		}
	}
	return path
}

func (s *source) valuePath(line int, tag, val string) string {
	prefix := strings.TrimSuffix(val, "...")
	for _, p := range s.byLine[line] {
		if p.key {
			continue
		}
		switch tag {
		case "!!map":
			if p.node.Kind == yaml.MappingNode {
				return p.path
			}
		case "!!seq":
			if p.node.Kind == yaml.SequenceNode {
				return p.path
			}
		default:
			if p.node.Kind == yaml.ScalarNode && strings.HasPrefix(p.node.Value, prefix) {
				return p.path
			}
		}
	}
	return ""
}

// typeWord names the Go type the decoder wanted in the operator's terms.
func typeWord(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case t == "bool":
		return "true or false"
	case t == "float64" || t == "float32":
		return "a number"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "an integer"
	case t == "string" || t == "catalog.Mode":
		return "a string"
	case strings.HasPrefix(t, "catalog."):
		return "a mapping"
	}
	return t
}

func tagWord(tag, val string) string {
	switch tag {
	case "!!map":
		return "a mapping"
	case "!!seq":
		return "a list"
	case "!!null":
		return "null"
	}
	return "`" + val + "`"
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
