//go:build jaeger

package test

// One trace end to end through a real trace backend: Jaeger v1.76.0, built
// from test/jaeger (a module of its own, so its dependencies stay out of
// toolgate's go.mod), started on loopback ports, the trace of a recovered
// request read back through Jaeger's HTTP query API. Run it with
// `make jaeger-test`, which builds Jaeger and sets TOOLGATE_JAEGER_BIN.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 1000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

func loopbackPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startJaeger runs Jaeger on loopback ports and returns its OTLP
// endpoint and query API base. It is stopped by its PID when t ends.
func startJaeger(t *testing.T) (otlp, query string) {
	bin := os.Getenv("TOOLGATE_JAEGER_BIN")
	if bin == "" {
		t.Fatal("TOOLGATE_JAEGER_BIN is not set; `make jaeger-test` builds Jaeger and sets it")
	}
	qHTTP, qGRPC, oHTTP := loopbackPort(t), loopbackPort(t), loopbackPort(t)
	cfg := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(jaegerConfig, qHTTP, qGRPC, oHTTP)), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("jaeger output:\n%s", logs.String())
		}
	})
	query = fmt.Sprintf("http://127.0.0.1:%d", qHTTP)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(query + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger's query API never answered:\n%s", logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", oHTTP), query
}

type jaegerTrace struct {
	Data []struct {
		Spans []struct {
			SpanID        string `json:"spanID"`
			OperationName string `json:"operationName"`
			References    []struct {
				RefType string `json:"refType"`
				SpanID  string `json:"spanID"`
			} `json:"references"`
			Tags []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"tags"`
			ProcessID string `json:"processID"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string `json:"serviceName"`
		} `json:"processes"`
	} `json:"data"`
}

func TestJaegerRecoveredRequest(t *testing.T) {
	otlpURL, query := startJaeger(t)
	m := newMock(t, chatWire.calls(false, tracedInvent),
		chatWire.text(decisionText(substitute("get_current_weather", tracedWeather.Args, 0.95))))
	v, _ := newValidator(t)
	g := tracedGate(t, m, v, "tracing: {endpoint: '"+otlpURL+"'}\n")
	tp, traceID, clientSpan := traceparentFor()
	if s := tracedPost(t, g.URL+chatWire.path(false), chatWire.request("What is the weather? "+markUserText, false), tp); s != 200 {
		t.Fatalf("status %d", s)
	}
	var tr jaegerTrace
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The server span ends just after the answer is sent.
		time.Sleep(100 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = g.App.Server.FlushTracing(ctx)
		cancel()
		tr = jaegerTrace{}
		resp, err := http.Get(query + "/api/traces/" + traceID)
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&tr)
			resp.Body.Close()
		}
		// server, two upstream calls, two judged calls, one validator
		if len(tr.Data) == 1 && len(tr.Data[0].Spans) >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s not complete in jaeger: %+v", traceID, tr)
		}
	}
	spans := tr.Data[0].Spans
	tags := func(i int) map[string]string {
		out := map[string]string{}
		for _, tg := range spans[i].Tags {
			out[tg.Key] = fmt.Sprint(tg.Value)
		}
		return out
	}
	server := -1
	for i, s := range spans {
		if tags(i)["span.kind"] == "server" {
			server = i
		}
		if svc := tr.Data[0].Processes[s.ProcessID].ServiceName; svc != "toolgate" {
			t.Errorf("span %s of service %q", s.OperationName, svc)
		}
	}
	if server < 0 {
		t.Fatalf("no server span: %+v", spans)
	}
	if st := tags(server); st["toolgate.outcome"] != "substituted" || spans[server].OperationName != "chat gpt-4o" ||
		len(spans[server].References) != 1 || spans[server].References[0].SpanID != clientSpan {
		t.Errorf("server span %s tags %v refs %+v", spans[server].OperationName, st, spans[server].References)
	}
	var kinds []string
	for i, s := range spans {
		if k := tags(i)["toolgate.upstream.kind"]; k != "" {
			kinds = append(kinds, k)
			if len(s.References) != 1 || s.References[0].SpanID != spans[server].SpanID {
				t.Errorf("upstream span %s refs %+v", s.OperationName, s.References)
			}
		}
	}
	if strings.Join(kinds, ",") != "original,recovery" && strings.Join(kinds, ",") != "recovery,original" {
		t.Errorf("upstream kinds %v", kinds)
	}
	raw, _ := json.Marshal(tr)
	for _, mark := range traceMarkers {
		if strings.Contains(string(raw), mark) {
			t.Errorf("jaeger holds the secret marker %s", mark)
		}
	}
}
