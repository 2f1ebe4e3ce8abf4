package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/proxy/mcp"
)

// TestPinCommand runs `toolgate pin` against real MCP servers on both
// revisions: the file it writes names every tool with the digest of the
// definition the server sent, is the same bytes when run again, and is a
// pin file serve loads.
func TestPinCommand(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		var o *mcptest.Orders
		if stateless {
			o = mcptest.StartStateless(false, nil)
		} else {
			o = mcptest.Start(false)
		}
		t.Cleanup(o.Close)
		dir := t.TempDir()
		cfg := filepath.Join(dir, "config.yaml")
		y := "upstreams: [{url: http://127.0.0.1:9}]\nmcp_servers:\n  - {name: orders, url: " + o.HTTP.URL + ", path_prefix: /mcp/orders}\n" +
			"catalog:\n  pins: {file: pins.json}\n"
		if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if code := run([]string{"pin", "--config", cfg}, &stdout, &stderr); code != 0 {
			t.Fatalf("stateless=%v: exit %d: %s", stateless, code, stderr.String())
		}
		first, err := os.ReadFile(filepath.Join(dir, "pins.json"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := catalog.ParsePinFile(first)
		if err != nil {
			t.Fatal(err)
		}
		tools := f.Servers["orders"]
		var names []string
		for n := range tools {
			names = append(names, n)
		}
		slices.Sort(names)
		if !slices.Contains(names, "lookup_order") || !slices.Contains(names, "cancel_order") || len(names) < 8 {
			t.Fatalf("stateless=%v: pinned %v", stateless, names)
		}
		for n, e := range tools {
			_, digest, err := mcp.Definition(e.Definition)
			if err != nil || digest != e.Digest {
				t.Errorf("%s: digest %s, its definition's %s (%v)", n, e.Digest, digest, err)
			}
		}
		var lookup map[string]any
		_ = json.Unmarshal(tools["lookup_order"].Definition, &lookup)
		if lookup["description"] != "Look an order up." || lookup["outputSchema"] == nil {
			t.Errorf("lookup_order's definition %s", tools["lookup_order"].Definition)
		}
		if !strings.Contains(stdout.String(), "orders: ") {
			t.Errorf("stdout %q", stdout.String())
		}
		if code := run([]string{"pin", "--config", cfg}, &stdout, &stderr); code != 0 {
			t.Fatal(stderr.String())
		}
		again, _ := os.ReadFile(filepath.Join(dir, "pins.json"))
		if !bytes.Equal(first, again) {
			t.Errorf("a second run wrote other bytes")
		}
		snap, err := catalog.Load(cfg)
		if err != nil || snap.Pins == nil || len(snap.Pins.Servers["orders"]) != len(names) {
			t.Fatalf("serve's load of the pinned config: %v", err)
		}
	}
}

// TestPinCommandErrors: usage errors exit 2, a server that cannot be
// read or a config without a pin file exits 1 and writes nothing.
func TestPinCommandErrors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"pin", "--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Usage: toolgate pin") {
		t.Fatalf("--help: %d %q", code, stdout.String())
	}
	if code := run([]string{"pin", "--bogus"}, &stdout, &stderr); code != 2 {
		t.Fatalf("an unknown flag exits %d", code)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("upstreams: [{url: http://127.0.0.1:9}]\nmcp_servers:\n  - {name: orders, url: http://127.0.0.1:9/mcp, path_prefix: /mcp/orders}\ncatalog:\n  pins: {file: pins.json}\n"), 0o600)
	stderr.Reset()
	if code := run([]string{"pin", "--config", cfg}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), `MCP server "orders"`) {
		t.Fatalf("an unreachable server: exit %d, %q", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "pins.json")); err == nil {
		t.Fatal("a failed run wrote the pin file")
	}
	os.WriteFile(cfg, []byte("upstreams: [{url: http://127.0.0.1:9}]\nmcp_servers:\n  - {name: orders, url: http://127.0.0.1:9/mcp, path_prefix: /mcp/orders}\n"), 0o600)
	stderr.Reset()
	if code := run([]string{"pin", "--config", cfg}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "catalog.pins.file is empty") {
		t.Fatalf("no pin file: exit %d, %q", code, stderr.String())
	}
}
