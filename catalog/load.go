package catalog

import (
	"bytes"
	"errors"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads, checks and compiles the config file at path. Relative paths
// inside it (catalog.files, recovery.prompt_file) are taken from the file's
// own folder, so the result does not depend on the working directory.
func Load(path string) (*Snapshot, error) {
	c, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	return Compile(c, filepath.Dir(path))
}

// LoadConfig reads and checks the config file at path without compiling it:
// no tool file, prompt file or environment variable is read.
func LoadConfig(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse decodes a config file strictly, fills in defaults and validates the
// result. name labels error messages. Every problem found is reported in one
// *ConfigError; each names its field path and, where known, its line.
func Parse(data []byte, name string) (*Config, error) {
	var root yaml.Node
	err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, &ConfigError{File: name, Problems: []Problem{syntaxProblemIn(err, data)}}
	}
	src := newSource(name, &root)

	var decoded []Problem
	var unread []string // parts of the config the decoder could not fill
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, &ConfigError{File: name, Problems: []Problem{syntaxProblemIn(err, data)}}
		}
		for _, m := range te.Errors {
			p, scope := src.translate(m)
			decoded = append(decoded, p)
			unread = append(unread, scope)
		}
	} else if err == nil {
		// A second document would be ignored silently; an operator who
		// wrote one expects it to count.
		var extra yaml.Node
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			line := extra.Line
			if err != nil {
				line = syntaxProblem(err).Line
			}
			decoded = append(decoded, Problem{Line: line, Message: "only one YAML document is allowed"})
			unread = append(unread, "-") // a scope no field has: nothing is hidden
		}
	}
	if len(root.Content) > 0 {
		for _, p := range fractionalInts(src, root.Content[0], reflect.TypeOf(c).Elem(), "") {
			decoded = append(decoded, p)
			unread = append(unread, p.Path)
		}
	}
	c.src = src
	for i := range c.Catalog.Tools {
		line := src.lineOf(indexPath("catalog.tools", i))
		if line > 0 {
			c.Catalog.Tools[i].Origin = name + ":" + strconv.Itoa(line)
		}
	}

	c.SetDefaults()
	var all []Problem
	all = append(all, decoded...)
	if err := c.Validate(); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			// A field the decoder could not read holds a zero value, and
			// validating that would only repeat the decoder's complaint.
			for _, p := range ce.Problems {
				if !covered(unread, p.Path) {
					all = append(all, p)
				}
			}
		}
	}
	if len(all) > 0 {
		// File order reads best; problems without a line (defaults) last.
		sort.SliceStable(all, func(i, j int) bool {
			li, lj := all[i].Line, all[j].Line
			return li != 0 && (lj == 0 || li < lj)
		})
		return nil, &ConfigError{File: name, Problems: all}
	}
	return c, nil
}

// fractionalInts finds numbers with a fraction written where the config
// wants an integer. The yaml decoder truncates those silently (1.5 attempts
// becomes 1), which would hide a typo, so they are refused here. It walks
// the file alongside the Config type using the same yaml tags the decoder
// uses, so new integer fields are covered without a list to keep in sync.
func fractionalInts(src *source, n *yaml.Node, t reflect.Type, path string) []Problem {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []Problem
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			for f := range t.Fields() {
				if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag == key && f.IsExported() {
					out = append(out, fractionalInts(src, n.Content[i+1], f.Type, fieldPath(path, key))...)
					break
				}
			}
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, e := range n.Content {
			out = append(out, fractionalInts(src, e, t.Elem(), indexPath(path, i))...)
		}
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float":
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			var f float64
			if err := n.Decode(&f); err != nil || f != math.Trunc(f) {
				out = append(out, Problem{Path: path, Line: n.Line, Message: "expected an integer, got `" + n.Value + "`"})
			}
		}
	}
	return out
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// covered reports whether path is, or lies under, a part of the config the
// decoder could not read.
func covered(unread []string, path string) bool {
	for _, u := range unread {
		if u == "" {
			return true // the document as a whole could not be read
		}
		if path == u || strings.HasPrefix(path, u+".") || strings.HasPrefix(path, u+"[") {
			return true
		}
	}
	return false
}

// syntaxProblemIn is syntaxProblem with the line moved to where the
// problem is. The YAML parser reports the line where the enclosing block
// began ("line 3: did not find expected key" for a key mis-indented at line
// 30 of a block opened at line 3), so the first line whose text, read up to
// that line, fails with the same message is the one to fix. Only the error
// path pays for the re-reads, from the reported line on, and at most
// syntaxSearchBytes of them: past that the parser's line stands.
func syntaxProblemIn(err error, data []byte) Problem {
	p := syntaxProblem(err)
	if p.Line == 0 {
		return p
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	var node yaml.Node
	end, read := 0, 0
	for n := 0; n < p.Line && n < len(lines); n++ {
		end += len(lines[n])
	}
	for n := p.Line; n <= len(lines) && read < syntaxSearchBytes; n++ {
		prefix := data[:end]
		if n < len(lines) {
			end += len(lines[n])
		}
		read += len(prefix)
		perr := yaml.Unmarshal(prefix, &node)
		if perr == nil {
			continue
		}
		if q := syntaxProblem(perr); q.Message == p.Message {
			p.Line = n
		}
		break
	}
	return p
}

// syntaxSearchBytes bounds the text syntaxProblemIn parses again.
const syntaxSearchBytes = 16 << 20

// syntaxProblem turns a YAML syntax error ("yaml: line 3: ...") into a
// Problem carrying that line.
func syntaxProblem(err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := reLine.FindStringSubmatch(msg); m != nil {
		return Problem{Line: atoi(m[1]), Message: m[2]}
	}
	return Problem{Message: msg}
}
