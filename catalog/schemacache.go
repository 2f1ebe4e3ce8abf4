package catalog

import (
	"bytes"
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

// requestSchemas is shared by every Snapshot: entries are keyed by the
// schema's exact text, which compiles the same under any config.
var requestSchemas = newSchemaCache(schemaCacheEntries, schemaCacheBytes)

// schemaCache maps schema JSON text to its compiled form (or compile error)
// so that the schema of a tool offered in requests is compiled once, not on
// every request.
type schemaCache struct {
	mu       sync.RWMutex
	m        map[string]*schemaEntry
	size     int
	entries  int
	maxBytes int
}

// schemaEntry compiles once even when many requests miss on it together.
type schemaEntry struct {
	once sync.Once
	sch  *jsonschema.Schema
	err  error
}

func newSchemaCache(entries, maxBytes int) *schemaCache {
	return &schemaCache{m: make(map[string]*schemaEntry, entries), entries: entries, maxBytes: maxBytes}
}

// get returns the compiled schema for text. When the cache is full it is
// emptied rather than managed as an LRU: that keeps every operation O(1)
// and lock hold times tiny, and a working set that fits is back after one
// round of misses.
func (c *schemaCache) get(text []byte) (*jsonschema.Schema, error) {
	if len(text) > schemaCacheMaxKey {
		return compileRequestSchema(text)
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
	e.once.Do(func() { e.sch, e.err = compileRequestSchema(text) })
	return e.sch, e.err
}

func (c *schemaCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// compileRequestSchema compiles a schema a client sent. The resource URL is
// the same for all: each compile uses its own compiler, so nothing is shared
// between schemas.
func compileRequestSchema(text []byte) (*jsonschema.Schema, error) {
	return compileSchema("https://toolgate.invalid/request/schema.json", text)
}

// compileSchema compiles one tool's parameters schema on its own compiler.
//
// Format assertions stay off (2020-12's default): OpenAI and Anthropic treat
// "format" as a hint and never reject a call for it, so enforcing it here
// would turn calls the provider considers valid into findings and re-queries.
//
// No loader is installed. The library's default would follow a "$ref" to a
// file:// URL, letting a request schema read the proxy's disk; every real
// tool schema is self-contained, so any external reference is refused.
func compileSchema(url string, text []byte) (sch *jsonschema.Schema, err error) {
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
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err = c.Compile(url)
	if err != nil {
		return nil, flatError(err)
	}
	return sch, nil
}

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
