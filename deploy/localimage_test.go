package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runFlags are the podman run flags this kind of host needs: a sandbox
// without CAP_SYS_RESOURCE cannot raise the open-files and process limits
// to podman's defaults (runc fails with "error setting rlimit type 7/6:
// operation not permitted"), and the test reaches the container and the
// container its mock upstream over the host's loopback. deploy/README.md
// documents the same line.
var runFlags = []string{"--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--network", "host"}

// TestLocalImage builds the image `make image` builds (scripts/image.sh,
// no registry), runs it with podman and checks that it serves: /readyz
// answers and one call is judged (an invented tool substituted by
// recovery against a mock model). Under CI=true a missing podman fails.
func TestLocalImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a container image")
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("podman not found: .ci/run installs it")
		}
		t.Skip("podman not found (apt-get install podman runc)")
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "toolgate")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+testVersion, "-o", bin, "./cmd/toolgate")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tag := fmt.Sprintf("localhost/toolgate:deploytest-%d", os.Getpid())
	img := exec.Command(filepath.Join(root, "scripts", "image.sh"), bin, tag)
	img.Env = append(os.Environ(), "CONTAINER_ENGINE="+podman)
	if out, err := img.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(podman, "rmi", "-f", tag).Run() })

	if out, err := exec.Command(podman, append(append([]string{"run", "--rm"}, runFlags...), tag, "version")...).CombinedOutput(); err != nil ||
		strings.TrimSpace(string(out)) != "toolgate "+testVersion {
		t.Fatalf("podman run %s version: %v\n%s", tag, err, out)
	}

	model := httptest.NewServer(http.HandlerFunc(scriptedModel))
	t.Cleanup(model.Close)
	listen, admin := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "config.yaml")
	yaml := "listen: " + listen + "\nadmin_listen: " + admin + "\nupstreams: [{url: '" + model.URL + "'}]\n" +
		"catalog:\n  mode: config\n  tools:\n" +
		"    - {name: web_search, description: Search the web., parameters: {type: object, properties: {query: {type: string}}, required: [query]}}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"run", "-d", "--rm", "--read-only"}, runFlags...),
		"-v", cfg+":/etc/toolgate/config.yaml:ro", tag)
	out, err := exec.Command(podman, args...).Output()
	if err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command(podman, "logs", id).CombinedOutput()
			t.Logf("container log:\n%s", logs)
		}
		_ = exec.Command(podman, "rm", "-f", "-t", "2", id).Run()
	})

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer 200 within 30s (last error %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Post("http://"+listen+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"how many active users?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if o := resp.Header.Get("X-Toolgate-Outcome"); resp.StatusCode != 200 || o != "substituted" || !bytes.Contains(body, []byte(`"name":"web_search"`)) {
		t.Errorf("judged call through the image: HTTP %d, outcome %q, body %s", resp.StatusCode, o, body)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scriptedModel calls database_query, a tool the catalog lacks, and
// answers toolgate's recovery prompt by substituting web_search.
func scriptedModel(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	msg := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
		"id": "call_1", "type": "function", "function": map[string]any{"name": "database_query", "arguments": `{"sql":"SELECT 1"}`}}}}
	finish := "tool_calls"
	if bytes.Contains(body, []byte("could not be run")) {
		msg = map[string]any{"role": "assistant", "content": `{"decision":"substitute","corrected_tool_call":{"tool_name":"web_search","arguments":{"query":"active users"}},"escalation":null,"confidence":0.9}`}
		finish = "stop"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}})
}
