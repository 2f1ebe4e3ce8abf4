package schema

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// The engine's two entry points: Validate judges a decoded value by the
// library, and Fast.ValidObject judges argument text by the fast path.
// Every validation against a schema compiled here goes through one of them.

// PatternError reports a pattern that could not be matched against a
// string within its budget (time, or the backtracking engine's stack). The
// string is the model's output: it is kept for locating the value, never for
// logs.
type PatternError struct {
	Pattern string
	Input   string
	Err     error
}

func (e *PatternError) Error() string {
	return fmt.Sprintf("pattern %q could not be evaluated in time: %v", e.Pattern, e.Err)
}

func (e *PatternError) Unwrap() error { return e.Err }

// ErrUnjudgeable reports a value the schema library failed on instead of
// judging it. The one known case is a number big.Rat does not read (an
// exponent beyond ±1e6) under a numeric keyword: the library dereferences
// the nil it gets back. A value nobody could judge must not pass.
var ErrUnjudgeable = errors.New("the arguments hold a value the schema validator cannot judge, such as a number with an exponent beyond ±1000000")

// Validate validates v against a schema compiled by this package, by the
// library, which words the findings. Every validation of a decoded value
// must go through here: a pattern over its budget panics inside the schema
// library, and this is where that becomes a *PatternError; any other panic
// of the library becomes ErrUnjudgeable.
func Validate(sch *jsonschema.Schema, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if pe, ok := r.(*PatternError); ok {
				err = pe
				return
			}
			err = ErrUnjudgeable
		}
	}()
	return sch.Validate(v)
}

// ValidObject judges argument text by the fast path alone. It reports true
// only when the text is valid UTF-8 holding one JSON object that the
// schema accepts, exactly when decoding it and Validate would find no
// fault. False means no ruling: decode the value and Validate it. A
// pattern that runs out of time is returned as a *PatternError, which the
// caller reports rather than meeting it again on the library's path.
func (f *Fast) ValidObject(raw []byte) (ok bool, err error) {
	if f == nil || !utf8.Valid(raw) {
		return false, nil
	}
	buf := tapePool.Get().(*[]jsonx.Node)
	defer func() {
		if cap(*buf) <= maxPooledNodes {
			*buf = (*buf)[:0]
			tapePool.Put(buf)
		}
	}()
	nodes, parsed := jsonx.AppendTape((*buf)[:0], raw)
	*buf = nodes
	if !parsed || nodes[0].Kind != '{' {
		return false, nil
	}
	defer func() {
		// A pattern over its budget is reported, with its own copy of the
		// value (see below); any other failure is left to the library's
		// path, which reports it as Validate does.
		if r := recover(); r != nil {
			ok, err = false, nil
			if pe, isPattern := r.(*PatternError); isPattern {
				pe.Input = strings.Clone(pe.Input)
				err = pe
			}
		}
	}()
	// The tape's text shares raw's bytes instead of copying them: every
	// string and number the walk reads is a substring of it, and none
	// outlives this call but a PatternError's value, cloned above. raw is
	// the caller's and is not written while it waits for this answer.
	t := &tape{text: unsafe.String(unsafe.SliceData(raw), len(raw)), nodes: nodes}
	return f.root.check(t, 0) == valid, nil
}
