package mcp

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/jsonx"
)

// A state holds only with toolgate's key, for its own call, until it
// expires.
func TestOpenState(t *testing.T) {
	key := stateKeyFor("secret", "", nil)
	now := time.Now()
	s := signedState{Kind: stateAsk, Call: "c1", Nonce: "n", Expires: now.Add(time.Minute).UnixMilli()}
	text := sealState(key, s)
	if got, err := openState(key, text, "c1", now); err != nil || got.Nonce != "n" {
		t.Fatalf("own state: %v %+v", err, got)
	}
	for _, c := range []struct {
		name string
		key  []byte
		text string
		call string
		now  time.Time
		want error
	}{
		{"expired", key, text, "c1", now.Add(2 * time.Minute), errStateExpired},
		{"another call", key, text, "c2", now, errStateMismatch},
		{"another key", stateKeyFor("other", "", nil), text, "c1", now, errStateTampered},
		{"no prefix", key, strings.TrimPrefix(text, statePrefix), "c1", now, errStateTampered},
		{"changed", key, strings.Replace(text, statePrefix+"e", statePrefix+"f", 1), "c1", now, errStateTampered},
		{"no signature", key, strings.Split(text, ".")[0] + "." + strings.Split(text, ".")[1], "c1", now, errStateTampered},
		{"garbage", key, statePrefix + "%%%.%%%", "c1", now, errStateTampered},
	} {
		if _, err := openState(c.key, c.text, c.call, c.now); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// Without configured material each process signs with its own key, which
// no other replica accepts.
func TestStateKeyMaterial(t *testing.T) {
	a, b := stateKeyFor("", "", randomKey()), stateKeyFor("", "", randomKey())
	if string(a) == string(b) {
		t.Fatal("two processes share a key")
	}
	if string(stateKeyFor("s", "tok", nil)) != string(stateKeyFor("s", "", nil)) {
		t.Fatal("state_secret_env does not take precedence over the admin token")
	}
}

// The nonce of an answered ask is taken once.
func TestUsedStates(t *testing.T) {
	var u usedStates
	now := time.Now()
	if !u.claim("n", now.Add(time.Minute).UnixMilli(), now) || u.claim("n", now.Add(time.Minute).UnixMilli(), now) {
		t.Fatal("a nonce was taken twice or not at all")
	}
}

// FuzzOpenState feeds the state reader what a client may send back: it
// never panics and accepts nothing it did not sign.
func FuzzOpenState(f *testing.F) {
	key := stateKeyFor("k", "", nil)
	f.Add(sealState(key, signedState{Kind: stateAsk, Call: "c", Expires: 1 << 60}))
	f.Add(statePrefix + "e30.AAAA")
	f.Add(statePrefix + "..")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := openState(key, text, "c", time.Unix(0, 0))
		// Only what toolgate sealed itself opens.
		if err == nil && sealState(key, s) != text {
			t.Fatalf("accepted %q, which toolgate did not seal", text)
		}
	})
}

// FuzzRevision feeds the revision and routing-header checks what a client
// may send: they never panic, and a request they let through has headers
// that name exactly its method and, for a call, its tool.
func FuzzRevision(f *testing.F) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	f.Add(call, "2026-07-28", "tools/call", "a")
	f.Add(call, "2026-07-28", " tools/call ", "b")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"x:/y"}}`, "2026-07-28", "resources/read", "x:/y")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t"}}`, "2099-01-01", "tasks/get", "t")
	f.Fuzz(func(t *testing.T, body, version, method, name string) {
		msgs, _, batch, perr := parseBody([]byte(body))
		if perr != nil || batch || len(msgs) != 1 || msgs[0].kind == kindResponse {
			return
		}
		m := &msgs[0]
		h := http.Header{}
		h.Set(hdrMethod, method)
		h.Set(hdrName, name)
		meta := requestMeta(m.params)
		mv, _ := jsonx.Unquote(meta.Get(metaProtocol))
		if checkRevision(m, h, version, mv) != nil {
			return
		}
		if strings.TrimSpace(method) != m.method {
			t.Fatalf("Mcp-Method %q passed for %q", method, m.method)
		}
		if m.method == "tools/call" {
			p, _ := jsonx.ParseObject(m.params)
			if n, _ := jsonx.Unquote(p.Get("name")); strings.TrimSpace(name) != n {
				t.Fatalf("Mcp-Name %q passed for %q", name, n)
			}
		}
	})
}
