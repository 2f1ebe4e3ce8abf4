package schema

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Options are the settings that change how a schema compiles.
type Options struct {
	// AnnotateFormats makes "format" a description only (catalog.formats:
	// annotate); by default the AssertedFormats are checked.
	AnnotateFormats bool
}

// Compile compiles one schema, named url, on its own compiler.
//
// Patterns are ECMA-262, as JSON Schema defines them (see pattern.go).
// Formats are asserted or only annotated as Options say (catalog.formats),
// whatever the draft: draft-07 asserts by default and 2020-12 annotates,
// but an operator wants one rule for the whole catalog.
//
// No loader is installed. The library's default would follow a "$ref" to a
// file:// URL, letting a request schema read the proxy's disk; every real
// tool schema is self-contained, so any external reference is refused.
func Compile(url string, text []byte, opt Options) (sch *jsonschema.Schema, err error) {
	defer func() {
		// The compiler runs on client-supplied input; a bug in it must cost
		// one tool its schema, not the process.
		if r := recover(); r != nil {
			sch, err = nil, fmt.Errorf("schema compiler failed: %v", r)
		}
	}()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	c.UseRegexpEngine(compilePattern)
	if opt.AnnotateFormats {
		for _, name := range AssertedFormats {
			c.RegisterFormat(&jsonschema.Format{Name: name, Validate: annotateOnly})
		}
	} else {
		c.AssertFormat()
	}
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err = c.Compile(url)
	if err != nil {
		return nil, flatError(err)
	}
	return sch, nil
}

// AssertedFormats are the "format" values checked under catalog.formats:
// assert (every format jsonschema v6 implements, plus "regex"). Other
// formats are annotations whatever the setting.
var AssertedFormats = []string{
	"date-time", "date", "time", "duration", "period",
	"email", "hostname", "ipv4", "ipv6",
	"uri", "uri-reference", "iri", "iri-reference", "uri-template",
	"uuid", "json-pointer", "relative-json-pointer", "semver", "regex",
}

// annotateOnly accepts every value: the format is a description only.
func annotateOnly(any) error { return nil }

// refuseLoader declines every external schema reference.
type refuseLoader struct{}

var errExternalRef = errors.New("external schema references are not followed; inline the schema or use $defs")

func (refuseLoader) Load(string) (any, error) { return nil, errExternalRef }

// flatError folds the compiler's multi-line message onto one line, so each
// problem in a config error stays on its own line.
func flatError(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "\n") {
		return err
	}
	lines := strings.Split(msg, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[i]), "- "))
	}
	return &flattened{msg: strings.Join(nonEmpty(lines), "; "), err: err}
}

// flattened shows the one-line text but keeps the compiler's error
// reachable through errors.As.
type flattened struct {
	msg string
	err error
}

func (e *flattened) Error() string { return e.msg }
func (e *flattened) Unwrap() error { return e.err }

func nonEmpty(ss []string) []string {
	out := ss[:0]
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
