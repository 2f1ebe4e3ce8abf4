package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Bounds of the request-schema cache. Agents send the same few tool lists
// over and over, so a few thousand entries cover any real fleet; a client
// sending a new schema on every request only ever costs a reset.
const (
	cacheEntries = 2048
	cacheBytes   = 64 << 20
	// CacheMaxKey is the longest schema text a cache keeps: one giant
	// schema must not evict everything. A longer one is compiled anew
	// each time.
	CacheMaxKey = 1 << 20
)

// requestSchemas are shared by every configuration: entries are keyed by
// the schema's exact text, which compiles the same under the same Options,
// so there is one cache per setting of the formats.
var requestSchemas = [2]*Cache{
	NewCache(cacheEntries, cacheBytes, Options{}),
	NewCache(cacheEntries, cacheBytes, Options{AnnotateFormats: true}),
}

// RequestCache returns the cache of schemas that clients send, shared by
// every configuration with the same Options.
func RequestCache(opt Options) *Cache {
	if opt.AnnotateFormats {
		return requestSchemas[1]
	}
	return requestSchemas[0]
}

// Cache maps schema JSON text to its compiled form (or compile error)
// so that the schema of a tool offered in requests is compiled once, not on
// every request.
type Cache struct {
	mu         sync.RWMutex
	byText     map[string]*Entry
	size       int
	maxEntries int
	maxBytes   int
	opt        Options
}

// Entry is one schema text compiled, once even when many requests miss on
// it together. It is read-only once returned.
type Entry struct {
	once sync.Once
	// Schema is nil when the text did not compile, and Err says why.
	Schema *jsonschema.Schema
	// Fast is Schema's fast path, nil when the library alone judges it.
	Fast *Fast
	Err  error
	// Hash names a schema that did not compile, in logs.
	Hash string
}

// reportedSchemas holds the hashes of uncompilable request schemas already
// logged, so each is logged once rather than on every request offering it,
// however the cache churns. It is emptied when full, like the cache.
var reportedSchemas = struct {
	mu sync.Mutex
	m  map[string]struct{}
}{m: map[string]struct{}{}}

// FirstReport reports whether hash, an Entry's Hash, is reported for the
// first time.
func FirstReport(hash string) bool {
	reportedSchemas.mu.Lock()
	defer reportedSchemas.mu.Unlock()
	if _, seen := reportedSchemas.m[hash]; seen {
		return false
	}
	if len(reportedSchemas.m) >= cacheEntries {
		reportedSchemas.m = map[string]struct{}{}
	}
	reportedSchemas.m[hash] = struct{}{}
	return true
}

// NewCache returns a cache of at most maxEntries schemas and maxBytes of
// schema text, compiling with opt.
func NewCache(maxEntries, maxBytes int, opt Options) *Cache {
	return &Cache{byText: make(map[string]*Entry, maxEntries), maxEntries: maxEntries, maxBytes: maxBytes, opt: opt}
}

// Get returns the compiled schema for text. When the cache is full it is
// emptied rather than managed as an LRU: that keeps every operation O(1)
// and lock hold times tiny, and a working set that fits is back after one
// round of misses.
func (c *Cache) Get(text []byte) (*jsonschema.Schema, error) {
	e := c.Entry(text)
	return e.Schema, e.Err
}

// Entry returns the cache entry of text, compiled.
func (c *Cache) Entry(text []byte) *Entry {
	if len(text) > CacheMaxKey {
		e := &Entry{}
		e.compile(text, c.opt)
		return e
	}
	c.mu.RLock()
	e := c.byText[string(text)]
	c.mu.RUnlock()
	if e == nil {
		c.mu.Lock()
		if e = c.byText[string(text)]; e == nil {
			if len(c.byText) >= c.maxEntries || c.size+len(text) > c.maxBytes {
				c.byText = make(map[string]*Entry, c.maxEntries)
				c.size = 0
			}
			e = &Entry{}
			c.byText[string(text)] = e
			c.size += len(text)
		}
		c.mu.Unlock()
	}
	e.once.Do(func() { e.compile(text, c.opt) })
	return e
}

// compile compiles a schema a client sent. The resource URL is the same
// for all: each compile uses its own compiler, so nothing is shared
// between schemas.
func (e *Entry) compile(text []byte, opt Options) {
	e.Schema, e.Err = Compile("https://toolgate.invalid/request/schema.json", text, opt)
	e.Fast = NewFast(e.Schema)
	if e.Err != nil {
		sum := sha256.Sum256(text)
		e.Hash = hex.EncodeToString(sum[:])[:12]
	}
}

// Len returns how many schemas the cache holds.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byText)
}
