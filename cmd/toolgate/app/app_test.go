package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// upstreamOK answers every chat request with one valid call to get_weather.
func upstreamOK(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},"finish_reason":"tool_calls"}]}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func configText(upstream, version string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstreams: [{url: %s}]
catalog:
  version: %s
  tools:
    - name: get_weather
      description: Current weather for a city.
      parameters: {type: object, properties: {city: {type: string}}, required: [city]}
`, upstream, version)
}

const chatRequest = `{"model":"m","messages":[{"role":"user","content":"weather in Oslo?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`

func post(t *testing.T, a *App) (*http.Response, error) {
	t.Helper()
	return http.Post("http://"+a.ProxyAddr()+"/v1/chat/completions", "application/json", strings.NewReader(chatRequest))
}

// k8sLayout writes the config the way a ConfigMap volume does: the file is
// a symlink through "..data", itself a symlink to a timestamped folder.
func k8sLayout(t *testing.T, dir, content, gen string) {
	t.Helper()
	real := filepath.Join(dir, "..gen_"+gen)
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "config.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink("..gen_"+gen, tmp); err != nil {
		t.Fatal(err)
	}
	// The atomic swap Kubernetes does: rename a new symlink over ..data.
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "config.yaml")
	if _, err := os.Lstat(link); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Join("..data", "config.yaml"), link); err != nil {
			t.Fatal(err)
		}
	}
}

func startFile(t *testing.T, path string) *App {
	t.Helper()
	a, err := Start(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	return a
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReloadOnConfigMapSymlinkSwap(t *testing.T) {
	up := upstreamOK(t)
	dir := t.TempDir()
	k8sLayout(t, dir, configText(up.URL, "v1"), "1")
	a := startFile(t, filepath.Join(dir, "config.yaml"))
	stop, err := a.Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if v := a.Store.Load().Version; v != "v1" {
		t.Fatalf("version = %s", v)
	}
	k8sLayout(t, dir, configText(up.URL, "v2"), "2")
	// The new snapshot goes live before the reload is counted; wait for both.
	waitFor(t, "the reload to v2", func() bool {
		return a.Store.Load().Version == "v2" && testutil.ToFloat64(a.Metrics.ConfigReloads.WithLabelValues("success")) >= 1
	})
	if got := testutil.ToFloat64(a.Metrics.CatalogInfo.WithLabelValues("v2")); got != 1 {
		t.Errorf("catalog_info{v2} = %v", got)
	}
	if n := testutil.CollectAndCount(a.Metrics.CatalogInfo); n != 1 {
		t.Errorf("catalog_info shows %d versions, want only the current one", n)
	}
	if got := testutil.ToFloat64(a.Metrics.ConfigReloads.WithLabelValues("success")); got < 1 {
		t.Errorf("reloads{success} = %v", got)
	}
}

func TestInvalidReloadKeepsServingWithoutAFailedRequest(t *testing.T) {
	up := upstreamOK(t)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(configText(up.URL, "good")), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startFile(t, path)

	var failed, served atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := post(t, a)
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Add(1)
				} else {
					served.Add(1)
				}
				if resp != nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if err := os.WriteFile(path, []byte("upstreams: [{url: 'not a url'}]\nbogus_key: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil {
		t.Fatal("an invalid config was accepted")
	}
	if err := os.WriteFile(path, []byte(strings.Replace(configText(up.URL, "x"), "listen: 127.0.0.1:0", "listen: 127.0.0.1:1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil {
		t.Fatal("a listener change was accepted without a restart")
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed during rejected reloads (%d served)", failed.Load(), served.Load())
	}
	if served.Load() == 0 {
		t.Fatal("no traffic was served")
	}
	if v := a.Store.Load().Version; v != "good" {
		t.Errorf("version = %s, want the old config still live", v)
	}
	if got := testutil.ToFloat64(a.Metrics.ConfigReloads.WithLabelValues("error")); got != 2 {
		t.Errorf("reloads{error} = %v, want 2", got)
	}
}

func TestShutdownLetsAnOpenStreamFinish(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"id\":\"s\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: {\"id\":\"s\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(configText(up.URL, "v")), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Start(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(chatRequest, `"model":"m"`, `"model":"m","stream":true`, 1)
	resp, err := http.Post("http://"+a.ProxyAddr()+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	shutdownDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shutdownDone <- a.Shutdown(ctx)
	}()
	waitFor(t, "readiness to go false", func() bool {
		rec := httptest.NewRecorder()
		a.Admin.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code == http.StatusServiceUnavailable
	})
	if _, err := http.Get("http://" + a.ProxyAddr() + "/v1/models"); err == nil {
		t.Error("a new connection was accepted while draining")
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the open stream was cut: %v", err)
	}
	if !strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("stream did not finish: %q", rest)
	}
	if err := <-shutdownDone; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
