package catalog

import (
	"strings"
	"testing"
)

func TestParsePinFile(t *testing.T) {
	good := `{"servers":{"orders":{"t":{"digest":"sha256:` + strings.Repeat("a", 64) + `","definition":{"name":"t"}}}}}`
	f, err := ParsePinFile([]byte(good))
	if err != nil || f.Servers["orders"]["t"].Digest == "" {
		t.Fatalf("%v %+v", err, f)
	}
	b, _ := f.Encode()
	if g, err := ParsePinFile(b); err != nil || g.Servers["orders"]["t"].Digest != f.Servers["orders"]["t"].Digest {
		t.Fatalf("encoded file does not read back: %v\n%s", err, b)
	}
	for _, bad := range []string{
		`[]`, `{"servers":{"orders":{"t":{"digest":"md5:1","definition":{}}}}}`,
		`{"servers":{"orders":{"t":{"digest":"sha256:` + strings.Repeat("a", 64) + `"}}}}`,
		`{"servers":{},"extra":1}`,
	} {
		if _, err := ParsePinFile([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func FuzzParsePinFile(f *testing.F) {
	f.Add([]byte(`{"servers":{"orders":{"t":{"digest":"sha256:` + strings.Repeat("a", 64) + `","definition":{"name":"t"}}}}}`))
	f.Add([]byte(`{"servers":null}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := ParsePinFile(data)
		if err != nil {
			return
		}
		for _, tools := range pf.Servers {
			for _, e := range tools {
				if !pinDigest.MatchString(e.Digest) || len(e.Definition) == 0 {
					t.Fatalf("accepted an entry that pins nothing: %+v", e)
				}
			}
		}
	})
}

func TestPinsConfig(t *testing.T) {
	base := "upstreams: [{url: http://127.0.0.1:9}]\nmcp_servers: [{name: orders, url: http://127.0.0.1:9/mcp, path_prefix: /mcp/orders}]\n"
	if _, err := Parse([]byte(base+"catalog: {pins: {first_use: true, on_drift: stop}}\n"), "c.yaml"); err == nil || !strings.Contains(err.Error(), "catalog.pins.on_drift") {
		t.Fatalf("a bad on_drift: %v", err)
	}
	if _, err := Parse([]byte("upstreams: [{url: http://127.0.0.1:9}]\ncatalog: {pins: {first_use: true}}\n"), "c.yaml"); err == nil || !strings.Contains(err.Error(), "catalog.pins") {
		t.Fatalf("pins without MCP servers: %v", err)
	}
	held := base + "admin_listen: 0.0.0.0:9091\ncatalog: {pins: {first_use: true, on_drift: hold}}\n"
	if _, err := Parse([]byte(held), "c.yaml"); err == nil || !strings.Contains(err.Error(), "approvals.admin_token_env") {
		t.Fatalf("hold off loopback without an admin token: %v", err)
	}
	c, err := Parse([]byte(base+"catalog: {pins: {file: missing.json}}\n"), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(c, t.TempDir()); err == nil || !strings.Contains(err.Error(), "catalog.pins.file") {
		t.Fatalf("a missing pin file: %v", err)
	}
}
