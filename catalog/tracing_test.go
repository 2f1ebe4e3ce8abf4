package catalog

import (
	"strings"
	"testing"
)

func TestTracingConfigAccepted(t *testing.T) {
	const up = "upstreams: [{url: 'https://api.openai.com'}]\n"
	tests := []struct {
		name, yaml string
		env        map[string]string
		headers    map[string]string
	}{
		{"off", up, nil, nil},
		{"http", up + "tracing: {endpoint: 'http://127.0.0.1:4318'}\n", nil, nil},
		{"grpc bare host:port", up + "tracing: {endpoint: '127.0.0.1:4317', protocol: grpc, sample_ratio: 0}\n", nil, nil},
		{"headers", up + "tracing: {endpoint: 'https://tempo.example:443/otlp/v1/traces', headers_env: TH}\n",
			map[string]string{"TH": "authorization=Basic c2VjcmV0, X-Scope-OrgID = tenant1 ,"},
			map[string]string{"authorization": "Basic c2VjcmV0", "X-Scope-OrgID": "tenant1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := compileYAML(t, tt.yaml, nil, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			got := snap.Secrets.TraceHeaders
			if len(got) != len(tt.headers) {
				t.Fatalf("headers %v, want %v", got, tt.headers)
			}
			for k, v := range tt.headers {
				if got[k] != v {
					t.Errorf("header %s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestTracingConfigRejected(t *testing.T) {
	const up = "upstreams: [{url: 'https://api.openai.com'}]\n"
	const secret = "s3cr3t-marker"
	tests := []struct {
		name, yaml string
		env        map[string]string
		want       []string
	}{
		{"protocol", up + "tracing: {endpoint: 'http://h:4318', protocol: thrift}\n", nil, []string{"tracing.protocol", "thrift"}},
		{"ratio above 1", up + "tracing: {sample_ratio: 1.5}\n", nil, []string{"tracing.sample_ratio"}},
		{"ratio negative", up + "tracing: {sample_ratio: -0.1}\n", nil, []string{"tracing.sample_ratio"}},
		{"http without scheme", up + "tracing: {endpoint: 'h:4318'}\n", nil, []string{"tracing.endpoint"}},
		{"ftp", up + "tracing: {endpoint: 'ftp://h:4318'}\n", nil, []string{"tracing.endpoint"}},
		{"credentials in URL", up + "tracing: {endpoint: 'https://u:" + secret + "@h:4318'}\n", nil, []string{"tracing.endpoint", "headers_env"}},
		{"query in URL", up + "tracing: {endpoint: 'https://h:4318/?key=" + secret + "'}\n", nil, []string{"tracing.endpoint"}},
		{"headers env unset", up + "tracing: {endpoint: 'http://h:4318', headers_env: TH}\n", nil, []string{"tracing.headers_env", "TH"}},
		{"headers not pairs", up + "tracing: {endpoint: 'http://h:4318', headers_env: TH}\n",
			map[string]string{"TH": "authorization " + secret}, []string{"tracing.headers_env", "TH", "entry 1"}},
		{"header name not a token", up + "tracing: {endpoint: 'http://h:4318', headers_env: TH}\n",
			map[string]string{"TH": "a=b,bad name=" + secret}, []string{"tracing.headers_env", "entry 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compileYAML(t, tt.yaml, nil, tt.env)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if strings.Contains(tt.name, "header") && strings.Contains(msg, secret) {
				t.Errorf("error quotes the header value: %q", msg)
			}
		})
	}
}
