package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
)

// codeBusy: the session has as many requests open as max_streams allows
// (implementation-defined, beside the codes of proxy/jsonrpc).
const codeBusy = -32001

// kind is what a JSON-RPC message is, by the fields it carries.
type kind uint8

const (
	kindRequest kind = iota + 1
	kindNotification
	kindResponse
)

// message is one JSON-RPC message with its exact bytes. The fields alias
// raw; id is the id's JSON text, compacted, so equal ids compare equal.
type message struct {
	raw    []byte
	kind   kind
	id     []byte
	method string
	params []byte
	result []byte
	err    []byte
}

// idKey is the message id as a map key.
func (m *message) idKey() string { return string(m.id) }

// rpcError is a protocol error toolgate answers a message with.
type rpcError struct {
	code int
	msg  string
	// id is the offending message's id when it could be read, else nil
	// (encoded as null).
	id []byte
}

// maxDepth bounds nesting in what toolgate reads, so a hostile document
// cannot exhaust the stack of any decoder after it.
const maxDepth = 128

// parseBody reads a POST body: one message or, where batches are allowed,
// an array of them. A body that is not JSON is a parse error for the whole
// body; an element that is JSON but not a message gets its own error and
// the others are still read, as JSON-RPC 2.0 §6 asks.
func parseBody(b []byte) (msgs []message, bad []rpcError, batch bool, perr *rpcError) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || !utf8.Valid(t) || !json.Valid(t) {
		return nil, nil, false, &rpcError{code: jsonrpc.CodeParseError, msg: "Parse error: the body is not valid JSON"}
	}
	if err := checkKeys(t); err != nil {
		return nil, nil, false, &rpcError{code: jsonrpc.CodeInvalidRequest, msg: "Invalid Request: " + err.Error()}
	}
	if t[0] != '[' {
		m, e := parseMessage(t)
		if e != nil {
			return nil, nil, false, e
		}
		return []message{m}, nil, false, nil
	}
	elems, err := jsonx.ParseArray(t)
	if err != nil {
		return nil, nil, true, &rpcError{code: jsonrpc.CodeParseError, msg: "Parse error: the body is not valid JSON"}
	}
	if len(elems) == 0 {
		return nil, nil, true, &rpcError{code: jsonrpc.CodeInvalidRequest, msg: "Invalid Request: an empty batch"}
	}
	for _, el := range elems {
		m, e := parseMessage(el)
		if e != nil {
			bad = append(bad, *e)
			continue
		}
		msgs = append(msgs, m)
	}
	return msgs, bad, true, nil
}

// parseMessage reads one JSON-RPC 2.0 message. Keys are matched exactly:
// a case-folding decoder would let {"name":"a","Name":"b"} mean one tool
// to toolgate and another to the server.
func parseMessage(b []byte) (message, *rpcError) {
	m := message{raw: b}
	obj, err := jsonx.ParseObject(b)
	if err != nil {
		return m, &rpcError{code: jsonrpc.CodeInvalidRequest, msg: "Invalid Request: a message must be a JSON object"}
	}
	if id := obj.Get("id"); id != nil {
		m.id = compact(id)
		if !validID(m.id) {
			return m, &rpcError{code: jsonrpc.CodeInvalidRequest, msg: "Invalid Request: id must be a string or a number"}
		}
	}
	bad := func(msg string) (message, *rpcError) {
		return m, &rpcError{code: jsonrpc.CodeInvalidRequest, msg: "Invalid Request: " + msg, id: m.id}
	}
	if v := obj.Get("jsonrpc"); v == nil || string(compact(v)) != `"2.0"` {
		return bad(`jsonrpc must be "2.0"`)
	}
	m.params, m.result, m.err = obj.Get("params"), obj.Get("result"), obj.Get("error")
	if raw := obj.Get("method"); raw != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil || s == "" {
			return bad("method must be a non-empty string")
		}
		m.method = s
		if m.result != nil || m.err != nil {
			return bad("a request carries no result or error")
		}
		if m.params != nil && !isObjectOrArray(m.params) {
			return bad("params must be an object or an array")
		}
		m.kind = kindNotification
		if m.id != nil {
			m.kind = kindRequest
		}
		return m, nil
	}
	if m.id == nil || (m.result == nil) == (m.err == nil) {
		return bad("a message needs a method, or an id and exactly one of result and error")
	}
	m.kind = kindResponse
	return m, nil
}

// validID: MCP ids are strings or numbers, never null (JSON-RPC allows
// null; MCP does not).
func validID(id []byte) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		return true
	}
	_, err := strconv.ParseFloat(string(id), 64)
	return err == nil && id[0] != '+'
}

func isObjectOrArray(v []byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '{' || v[0] == '[')
}

func compact(v []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return bytes.TrimSpace(v)
	}
	return b.Bytes()
}

// checkKeys refuses repeated keys anywhere and nesting beyond maxDepth.
// Decoders differ on which of two equal keys wins; refusing both is the
// only reading toolgate and every server share.
func checkKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		obj  bool
		key  bool // the next string token of an object is a key
		seen map[string]struct{}
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errors.New("the body is not valid JSON")
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if top != nil && top.obj {
					top.key = true
				}
				if len(stack) == maxDepth {
					return errors.New("the message is nested too deeply")
				}
				stack = append(stack, frame{obj: t == '{', key: t == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.obj && top.key {
				if top.seen == nil {
					top.seen = map[string]struct{}{}
				}
				if _, dup := top.seen[t]; dup {
					return errors.New("the key " + strconv.Quote(t) + " appears twice in one object")
				}
				top.seen[t] = struct{}{}
				top.key = false
				continue
			}
			if top != nil && top.obj {
				top.key = true
			}
		default:
			if top != nil && top.obj {
				top.key = true
			}
		}
	}
}

// request encodes a JSON-RPC request toolgate itself sends.
func request(id, method string, params any) []byte {
	type req struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}
	b, _ := jsonx.Marshal(req{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	return b
}

// joinBatch encodes elements as one JSON array.
func joinBatch(elems [][]byte) []byte {
	out := []byte{'['}
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}
