package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestPrometheusRecordsHallucinationRate proves the shipped recording rule
// against a real Prometheus: it scrapes toolgate's admin port while known
// traffic flows, and the rule's value per catalog version must be the share
// of calls that named a tool that does not exist.
func TestPrometheusRecordsHallucinationRate(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is not installed; .ci/run installs Debian's prometheus package")
		}
		t.Skip("prometheus binary not found (apt-get install prometheus); CI runs this test")
	}
	rules, err := filepath.Abs("../deploy/prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}

	// Every fourth answer invents a tool; shadow mode counts it without a
	// re-query, so the traffic is exactly what the test sends.
	m := newMockFunc(t, func(n int, _ *mockRequest) mockReply {
		if n%4 == 0 {
			return callsAnswer(fmt.Sprintf("chatcmpl-%d", n), invented)
		}
		return callsAnswer(fmt.Sprintf("chatcmpl-%d", n), weather)
	})
	g := startGate(t, config(m, "", "mode: shadow\n"+catalogYAML(t, "")))

	dir := t.TempDir()
	promAddr := freeAddr(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: toolgate
    static_configs:
      - targets: [%q]
`, rules, g.App.AdminAddr())
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr,
		"--log.level=warn")
	logf, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b)
		}
	})

	// Wait until Prometheus has scraped toolgate at least twice, so the
	// zero-valued series toolgate creates at start are in the window.
	waitProm(t, ctx, promAddr, `count_over_time(up{job="toolgate"}[1m]) >= 2`)

	const requests = 40 // 10 of them invent a tool: expected rate 0.25
	for i := 0; i < requests; i++ {
		r := chat(t, g.URL, fixtureParams(t))
		if r.Err != nil {
			t.Fatalf("request %d: %v", i, r.Err)
		}
	}

	// The rule is evaluated every second; poll until an evaluation has
	// taken in a scrape made after the last request.
	q := `toolgate:hallucination_rate:ratio_rate5m{catalog_version="` + fixtureVersion + `"}`
	deadline := time.Now().Add(20 * time.Second)
	var v float64
	for {
		v = waitProm(t, ctx, promAddr, q)
		total, _ := promQuery(promAddr, `sum(toolgate_tool_calls_total)`)
		if total == requests && (v > 0.2499 && v < 0.2501) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v (scraped tool calls %v), want 0.25", q, v, total)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitProm polls an instant query until it returns one sample, and returns
// its value.
func waitProm(t *testing.T, ctx context.Context, addr, query string) float64 {
	t.Helper()
	for {
		if v, ok := promQuery(addr, query); ok {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no result for %s before the deadline", query)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func promQuery(addr, query string) (float64, bool) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &r) != nil || len(r.Data.Result) != 1 {
		return 0, false
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
