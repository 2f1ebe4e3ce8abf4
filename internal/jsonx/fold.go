package jsonx

import "bytes"

// KeyFold finds object keys that equal one of its names when case is
// ignored but differ from it as written. encoding/json matches struct
// fields that way while JSON itself, and most clients, are case-sensitive;
// a document that relies on the difference would be read one way by
// toolgate and another by the agent, so callers refuse it.
type KeyFold struct {
	names [][]byte
	// plain: no name has an upper-case or non-ASCII letter, so a key
	// without one either can only fold onto a name it equals.
	plain bool
}

// NewKeyFold prepares names for KeyFold.In.
func NewKeyFold(names ...string) *KeyFold {
	k := &KeyFold{names: make([][]byte, len(names)), plain: true}
	for i, n := range names {
		k.names[i] = []byte(n)
		if MayFold(n) {
			k.plain = false
		}
	}
	return k
}

// In reports whether any object key anywhere in data folds onto one of the
// names without equalling it. It runs on every answer and every stream
// event, so it finds strings with IndexByte and looks at the bytes of a
// string only when a colon shows it is a key: text content, often most of
// a document, is skipped at memory speed. Reading the tokens with jsontext
// instead took 2.1 µs an event where this takes 1.0 µs, and 76 µs for the
// 39 JSON events of testdata/answer.sse where this takes 36 µs: a seventh
// more on the 282 µs of judging that stream (BenchmarkStreamFilterWorkload
// in proxy/openaichat), above what ParseObject's own move to jsontext
// added. CPU time per op, medians of 5 runs on a loaded 2-core machine.
func (k *KeyFold) In(data []byte) bool {
	i := 0
	for {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			return false
		}
		start := i + q
		end := closingQuote(data, start)
		if end < 0 {
			return false
		}
		i = end + 1
		if c := skipWS(data, i); c < len(data) && data[c] == ':' && k.folds(data[start+1:end]) {
			return true
		}
	}
}

// MayFold reports a key with an upper-case ASCII letter, a non-ASCII byte
// or an escape: the only keys that can fold onto a lower-case ASCII name
// they differ from, so a check for folded keys can pass every other key by.
func MayFold[T ~string | ~[]byte](key T) bool {
	i := 0
	for ; i+8 <= len(key); i += 8 {
		// Eight bytes at a time: any byte above 0x7F, else a backslash or
		// a byte from 'A' to 'Z' (adding 0x3F sets the high bit of a byte
		// from 'A' up, adding 0x25 of one past 'Z'; neither carries out of
		// a byte below 0x80).
		x := uint64(key[i]) | uint64(key[i+1])<<8 | uint64(key[i+2])<<16 | uint64(key[i+3])<<24 |
			uint64(key[i+4])<<32 | uint64(key[i+5])<<40 | uint64(key[i+6])<<48 | uint64(key[i+7])<<56
		if x&highs != 0 || zeroByte(x^(ones*'\\')) != 0 || (x+ones*0x3F)&^(x+ones*0x25)&highs != 0 {
			return true
		}
	}
	for ; i < len(key); i++ {
		if c := key[i]; c >= 0x80 || c == '\\' || 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

func (k *KeyFold) folds(key []byte) bool {
	if k.plain && !MayFold(key) {
		return false
	}
	if bytes.IndexByte(key, '\\') >= 0 {
		// An escaped key is compared as decoders see it.
		var ok bool
		if key, ok = AppendUnescaped(nil, key); !ok {
			return false
		}
	}
	return k.foldsDecoded(key)
}

// Folds is In for one decoded key (an Object's Key): whether it folds onto
// one of the names without equalling it. A caller that knows where a
// document's protocol keys are checks just those, and leaves keys inside
// values it does not interpret (a call's arguments) to the validator.
func (k *KeyFold) Folds(key string) bool {
	if k.plain && !MayFold(key) {
		return false
	}
	return k.foldsDecoded([]byte(key))
}

func (k *KeyFold) foldsDecoded(key []byte) bool {
	for _, n := range k.names {
		// Only a non-ASCII key can fold onto a name of another length
		// (the Kelvin sign is three bytes and folds onto "k").
		if len(key) != len(n) && isASCII(key) {
			continue
		}
		if !bytes.Equal(key, n) && bytes.EqualFold(key, n) {
			return true
		}
	}
	return false
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
