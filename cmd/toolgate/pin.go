package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/proxy/sse"
)

const pinUsage = `Usage: toolgate pin [--config config.yaml] [--out FILE]

Reads every MCP server's tool list (on the revision the server speaks) and
writes the pin file: per server and tool, the definition's digest and the
definition itself, in a stable order, for review and version control. serve
then judges each listed definition against it (catalog.pins.on_drift).
The file is catalog.pins.file (relative to the config's folder) unless --out
names another. Exit 0: written; 1: the config or a server failed; 2: usage.

Flags:
`

// pinTimeout bounds the reading of one server's list.
const pinTimeout = 30 * time.Second

func pinCommand(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pin", pinUsage)
	path := fs.String("config", "config.yaml", "path to the config file")
	out := fs.String("out", "", "write the pin file here instead of catalog.pins.file")
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	// The pin file may not exist yet: the config is read, not compiled.
	cfg, err := catalog.LoadConfig(*path)
	if err != nil {
		loadError(stderr, "pin", *path, err)
		return 1
	}
	dest := *out
	if dest == "" {
		if cfg.Catalog.Pins.File == "" {
			fmt.Fprintln(stderr, "toolgate pin: catalog.pins.file is empty; set it or pass --out FILE")
			return 1
		}
		dest = cfg.Catalog.Pins.File
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(filepath.Dir(*path), dest)
		}
	}
	if len(cfg.MCPServers) == 0 {
		fmt.Fprintln(stderr, "toolgate pin: mcp_servers is empty; there is nothing to pin")
		return 1
	}
	f := &catalog.PinFile{Servers: map[string]map[string]catalog.PinEntry{}}
	for _, s := range cfg.MCPServers {
		tools, err := pinServer(s)
		if err != nil {
			fmt.Fprintf(stderr, "toolgate pin: MCP server %q: %v\n", s.Name, err)
			return 1
		}
		f.Servers[s.Name] = tools
		fmt.Fprintf(stdout, "%s: %d tools pinned\n", s.Name, len(tools))
	}
	b, err := f.Encode()
	if err == nil {
		err = os.WriteFile(dest, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(stderr, "toolgate pin:", err)
		return 1
	}
	fmt.Fprintln(stdout, "wrote", dest)
	return 0
}

// pinServer reads one server's tools with the MCP SDK's client, which
// speaks whichever revision the server does, and takes each definition
// from the bytes the server sent: a definition decoded and encoded again
// could differ from the one serve will see.
func pinServer(s catalog.MCPServer) (map[string]catalog.PinEntry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pinTimeout)
	defer cancel()
	rec := &listRecorder{next: http.DefaultTransport}
	if s.APIKeyEnv != "" {
		rec.key = os.Getenv(s.APIKeyEnv)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "toolgate-pin", Version: version}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: rec}}, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	want := map[string]bool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		want[t.Name] = true
	}
	out := map[string]catalog.PinEntry{}
	for _, raw := range rec.tools() {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &named) != nil || !want[named.Name] {
			continue
		}
		def, digest, err := mcp.Definition(raw)
		if err != nil {
			return nil, fmt.Errorf("tool %q: its definition cannot be pinned: %v", named.Name, err)
		}
		out[named.Name] = catalog.PinEntry{Digest: digest, Definition: def}
	}
	if len(out) != len(want) {
		return nil, errors.New("the tools listed could not all be read from the server's answers")
	}
	return out, nil
}

// listRecorder keeps the raw tools of every tools/list answer.
type listRecorder struct {
	next  http.RoundTripper
	key   string
	mu    sync.Mutex
	lists []json.RawMessage
}

func (r *listRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.key != "" && req.Header.Get("Authorization") == "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.record(body, resp.Header.Get("Content-Type"))
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func (r *listRecorder) record(body []byte, contentType string) {
	msgs := [][]byte{body}
	if bytes.HasPrefix([]byte(contentType), []byte("text/event-stream")) {
		msgs = nil
		rd := sse.NewReader(bytes.NewReader(body), len(body)+1)
		for rd.Next() {
			msgs = append(msgs, rd.Event().Data)
		}
	}
	for _, m := range msgs {
		var v struct {
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal(m, &v) == nil {
			r.mu.Lock()
			r.lists = append(r.lists, v.Result.Tools...)
			r.mu.Unlock()
		}
	}
}

func (r *listRecorder) tools() []json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists
}
