package test

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Every metric toolgate serves on /metrics is documented in
// docs/metrics.md, and every toolgate_ metric the page names exists. The
// toolgate started here has a confirm tool, so the approval metrics are
// registered too; the Go and process collectors are covered by the page's
// first line.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "plus Go and process collectors") {
		t.Error("docs/metrics.md no longer says that /metrics carries the Go and process collectors")
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(toolgate_[a-z_]+)`").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}

	m := newMock(t)
	g := startGate(t, config(m, "", catalogYAML(t, "strict: auto",
		"    - {name: issue_refund, description: Refund an order., policy: confirm, parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]}}")))

	served := map[string]bool{}
	descs := make(chan *prometheus.Desc)
	go func() { g.App.Registry.Describe(descs); close(descs) }()
	fq := regexp.MustCompile(`fqName: "([a-z_:]+)"`)
	for d := range descs {
		if n := fq.FindStringSubmatch(d.String()); n != nil && strings.HasPrefix(n[1], "toolgate_") {
			served[n[1]] = true
		}
	}
	// What the admin listener serves comes from that registry: the names
	// it prints are among the described ones.
	resp, err := http.Get("http://" + g.App.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, n := range regexp.MustCompile(`(?m)^# TYPE (toolgate_[a-z_]+) `).FindAllStringSubmatch(string(body), -1) {
		if !served[n[1]] {
			t.Errorf("/metrics serves %s, which the registry does not describe", n[1])
		}
	}
	if len(served) < 20 {
		t.Fatalf("only %d toolgate metrics described: %v", len(served), served)
	}
	var undocumented, unserved []string
	for n := range served {
		if !documented[n] {
			undocumented = append(undocumented, n)
		}
	}
	for n := range documented {
		if !served[n] {
			unserved = append(unserved, n)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(unserved)
	if len(undocumented) > 0 {
		t.Errorf("served but not in docs/metrics.md: %v", undocumented)
	}
	if len(unserved) > 0 {
		t.Errorf("in docs/metrics.md but not served: %v", unserved)
	}
}
