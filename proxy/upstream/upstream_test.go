package upstream

import (
	"net/http"
	"testing"

	"github.com/toolgate/toolgate/catalog"
)

// The key goes where each provider reads it: a bearer for OpenAI and the
// compatible rest, api-key for Azure OpenAI, x-api-key for Anthropic.
func TestSetKey(t *testing.T) {
	for _, tc := range []struct{ host, api, header, value string }{
		{"api.openai.com", "chat", "Authorization", "Bearer k"},
		{"my-res.openai.azure.com", "chat", "Api-Key", "k"},
		{"MY-RES.OPENAI.AZURE.COM", "responses", "Api-Key", "k"},
		{"api.anthropic.com", "chat", "X-Api-Key", "k"},
		{"llm.internal", "messages", "X-Api-Key", "k"},
		{"localhost", "chat", "Authorization", "Bearer k"},
	} {
		h := http.Header{}
		SetKey(h, tc.host, tc.api, "k")
		if len(h) != 1 || h.Get(tc.header) != tc.value {
			t.Errorf("%s %s: headers %v, want %s: %s", tc.host, tc.api, h, tc.header, tc.value)
		}
	}
}

// A port in the upstream URL does not hide the provider from the choice.
func TestApplyKeyIgnoresThePort(t *testing.T) {
	u, err := New(catalog.Upstream{URL: "https://my-res.openai.azure.com:443/openai"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	u.ApplyKey(h, "", "chat")
	if h.Get("Api-Key") != "k" || h.Get("Authorization") != "" {
		t.Fatalf("headers %v, want Api-Key", h)
	}
}
