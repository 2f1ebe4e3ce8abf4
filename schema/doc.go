// Package schema is toolgate's JSON Schema engine: it compiles a tool's
// parameters schema on jsonschema v6 (ECMA-262 patterns, formats asserted
// or annotated, no external references), caches the schemas clients send,
// and judges arguments, first by the fast path over their text and then,
// for what the fast path does not find valid, by the library.
//
// It is a package of its own, beside catalog rather than inside it,
// because two layers use it for different things: catalog compiles the
// configured tools' schemas when it loads a config, and validate judges
// each call's arguments against them. It knows JSON Schema and nothing of
// the config that names the schemas, so it imports no other package of
// toolgate's but the leaf libraries (internal/jsonx for the tape).
package schema
