package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/proxy/jsonrpc"
	"github.com/toolgate/toolgate/proxy/sse"
)

// FuzzJSONRPC feeds the JSON-RPC reader single messages, batches and SSE
// streams. It must never panic; every message it accepts must be valid
// JSON of the kind it says; and a message toolgate frames as an SSE event
// must come back whole from the SSE reader.
func FuzzJSONRPC(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"tools":[]}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"bad":1},{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`,
		`[]`, `{"jsonrpc":`, `"x"`, `{"id":null}`,
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		"id: 7\ndata: {\"jsonrpc\":\"2.0\",\n data: \"method\":\"x\"}\r\n\r\n: keepalive\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkBody(t, b)
		rd := sse.NewReader(bytes.NewReader(b), 1<<16)
		for rd.Next() {
			if d := rd.Event().Data; len(d) > 0 {
				checkBody(t, append([]byte(nil), d...))
			}
		}
	})
}

func checkBody(t *testing.T, b []byte) {
	msgs, bad, _, perr := parseBody(b)
	if perr != nil {
		if !json.Valid(jsonrpc.ErrorResponse(perr.id, perr.code, perr.msg, nil)) {
			t.Fatalf("the error answer is not JSON")
		}
		return
	}
	for _, e := range bad {
		if e.code != jsonrpc.CodeInvalidRequest {
			t.Fatalf("element error %d", e.code)
		}
	}
	for _, m := range msgs {
		if !json.Valid(m.raw) {
			t.Fatalf("accepted a message that is not JSON: %q", m.raw)
		}
		switch m.kind {
		case kindRequest, kindNotification:
			if m.method == "" || (m.kind == kindRequest) != (m.id != nil) {
				t.Fatalf("request without method or with the wrong id: %q", m.raw)
			}
		case kindResponse:
			if m.id == nil || (m.result == nil) == (m.err == nil) {
				t.Fatalf("response without id or with both result and error: %q", m.raw)
			}
		default:
			t.Fatalf("message of no kind: %q", m.raw)
		}
		if m.method == "tools/call" {
			callParams(m.params)
		}
		framed := jsonrpc.Event(m.id, compact(m.raw))
		rd := sse.NewReader(bytes.NewReader(framed), 0)
		if !rd.Next() || !bytes.Equal(rd.Event().Data, compact(m.raw)) || rd.Next() {
			t.Fatalf("framing %q did not read back as one event", framed)
		}
		if m.id != nil && !strings.Contains(string(jsonrpc.ErrorResponse(m.id, 1, "m", nil)), string(m.id)) {
			t.Fatalf("an answer lost the id %s", m.id)
		}
	}
}
