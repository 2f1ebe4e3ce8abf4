package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Bounds of the request-schema cache. Agents send the same few tool lists
// over and over, so a few thousand entries cover any real fleet; a client
// sending a new schema on every request only ever costs a reset.
const (
	schemaCacheEntries = 2048
	schemaCacheBytes   = 64 << 20
	// schemaCacheMaxKey keeps one giant schema from evicting everything.
	schemaCacheMaxKey = 1 << 20
)

// requestSchemas are shared by every Snapshot: entries are keyed by the
// schema's exact text, which compiles the same under any config with the
// same catalog.formats, so there is one cache per setting.
var requestSchemas = map[string]*schemaCache{
	FormatsAssert:   newSchemaCache(schemaCacheEntries, schemaCacheBytes, schemaOptions{formats: FormatsAssert}),
	FormatsAnnotate: newSchemaCache(schemaCacheEntries, schemaCacheBytes, schemaOptions{formats: FormatsAnnotate}),
}

// requestSchemaCache returns the shared cache for a catalog.formats value.
func requestSchemaCache(formats string) *schemaCache {
	if c := requestSchemas[formats]; c != nil {
		return c
	}
	return requestSchemas[FormatsAssert]
}

// schemaCache maps schema JSON text to its compiled form (or compile error)
// so that the schema of a tool offered in requests is compiled once, not on
// every request.
type schemaCache struct {
	mu       sync.RWMutex
	m        map[string]*schemaEntry
	size     int
	entries  int
	maxBytes int
	opt      schemaOptions
}

// schemaEntry compiles once even when many requests miss on it together.
type schemaEntry struct {
	once sync.Once
	sch  *jsonschema.Schema
	fast *fastSchema
	err  error
	// hash names a schema that did not compile, in logs.
	hash string
}

// reportedSchemas holds the hashes of uncompilable request schemas already
// logged, so each is logged once rather than on every request offering it,
// however the cache churns. It is emptied when full, like the cache.
var reportedSchemas = struct {
	mu sync.Mutex
	m  map[string]struct{}
}{m: map[string]struct{}{}}

// firstReport reports whether hash is reported for the first time.
func firstReport(hash string) bool {
	reportedSchemas.mu.Lock()
	defer reportedSchemas.mu.Unlock()
	if _, seen := reportedSchemas.m[hash]; seen {
		return false
	}
	if len(reportedSchemas.m) >= schemaCacheEntries {
		reportedSchemas.m = map[string]struct{}{}
	}
	reportedSchemas.m[hash] = struct{}{}
	return true
}

func newSchemaCache(entries, maxBytes int, opt schemaOptions) *schemaCache {
	return &schemaCache{m: make(map[string]*schemaEntry, entries), entries: entries, maxBytes: maxBytes, opt: opt}
}

// get returns the compiled schema for text. When the cache is full it is
// emptied rather than managed as an LRU: that keeps every operation O(1)
// and lock hold times tiny, and a working set that fits is back after one
// round of misses.
func (c *schemaCache) get(text []byte) (*jsonschema.Schema, error) {
	e := c.entry(text)
	return e.sch, e.err
}

// entry returns the cache entry of text, compiled.
func (c *schemaCache) entry(text []byte) *schemaEntry {
	if len(text) > schemaCacheMaxKey {
		e := &schemaEntry{}
		e.compile(text, c.opt)
		return e
	}
	c.mu.RLock()
	e := c.m[string(text)]
	c.mu.RUnlock()
	if e == nil {
		c.mu.Lock()
		if e = c.m[string(text)]; e == nil {
			if len(c.m) >= c.entries || c.size+len(text) > c.maxBytes {
				c.m = make(map[string]*schemaEntry, c.entries)
				c.size = 0
			}
			e = &schemaEntry{}
			c.m[string(text)] = e
			c.size += len(text)
		}
		c.mu.Unlock()
	}
	e.once.Do(func() { e.compile(text, c.opt) })
	return e
}

func (e *schemaEntry) compile(text []byte, opt schemaOptions) {
	e.sch, e.err = compileRequestSchema(text, opt)
	e.fast = newFastSchema(e.sch)
	if e.err != nil {
		sum := sha256.Sum256(text)
		e.hash = hex.EncodeToString(sum[:])[:12]
	}
}

func (c *schemaCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// compileRequestSchema compiles a schema a client sent. The resource URL is
// the same for all: each compile uses its own compiler, so nothing is shared
// between schemas.
func compileRequestSchema(text []byte, opt schemaOptions) (*jsonschema.Schema, error) {
	return compileSchema("https://toolgate.invalid/request/schema.json", text, opt)
}

// schemaOptions are the config settings that change how a schema compiles.
type schemaOptions struct {
	// formats is catalog.formats.
	formats string
}

// compileSchema compiles one tool's parameters schema on its own compiler.
//
// Patterns are ECMA-262, as JSON Schema defines them (see pattern.go).
// Formats are asserted or only annotated as catalog.formats says, whatever
// the draft: draft-07 asserts by default and 2020-12 annotates, but an
// operator wants one rule for the whole catalog.
//
// No loader is installed. The library's default would follow a "$ref" to a
// file:// URL, letting a request schema read the proxy's disk; every real
// tool schema is self-contained, so any external reference is refused.
func compileSchema(url string, text []byte, opt schemaOptions) (sch *jsonschema.Schema, err error) {
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
	if opt.formats == FormatsAnnotate {
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
