package test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
)

// deadUpstream is an upstream URL nothing answers on.
func deadUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	return url
}

// toolgate's own errors come in the route's envelope, so each official
// SDK reads them as its own API errors: Anthropic's on /v1/messages, with
// the type Anthropic gives a 502, OpenAI's on Chat and Responses.
func TestOwnErrorsInTheRoutesEnvelope(t *testing.T) {
	base := respStartGate(t, deadUpstream(t), "")

	t.Run("messages", func(t *testing.T) {
		_, _, err := anthCall(t, base, anthParams(), false)
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadGateway {
			t.Fatalf("error %v, want an anthropic.Error with status 502", err)
		}
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type, Code, Message string
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(anthBody(t, ae)), &body); err != nil {
			t.Fatal(err)
		}
		if body.Type != "error" || body.Error.Type != "api_error" || body.Error.Code != "upstream_error" || body.Error.Message == "" {
			t.Fatalf("body %+v", body)
		}
	})
	t.Run("responses", func(t *testing.T) {
		_, _, _, err := respRun(t, respClient(base), respParams("hi"), false)
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != http.StatusBadGateway || oe.Code != "upstream_error" || oe.Type != "upstream_error" {
			t.Fatalf("error %v, want an openai.Error 502 upstream_error", err)
		}
	})
}
