package demo

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"
)

// The served demo answers each provider's Go SDK at the base URL it
// prints, with the invented call judged and replaced by web_search.
func TestServeGoSDKs(t *testing.T) {
	_, base := startServe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	question := "How many active users do we have?"

	var oh http.Header
	oc := openai.NewClient(oaioption.WithBaseURL(base+"/v1"), oaioption.WithAPIKey("demo"), oaioption.WithMaxRetries(0),
		oaioption.WithMiddleware(func(r *http.Request, next oaioption.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if resp != nil {
				oh = resp.Header
			}
			return resp, err
		}))
	cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "scripted-1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)}})
	if err != nil {
		t.Fatalf("openai-go: %v", err)
	}
	if calls := cc.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].Function.Name != "web_search" || oh.Get("X-Toolgate-Outcome") != "substituted" {
		t.Errorf("openai-go: calls %+v, outcome %q", calls, oh.Get("X-Toolgate-Outcome"))
	}

	var ah http.Header
	ac := anthropic.NewClient(anthoption.WithBaseURL(base+"/anthropic"), anthoption.WithAPIKey("demo"), anthoption.WithMaxRetries(0),
		anthoption.WithMiddleware(func(r *http.Request, next anthoption.MiddlewareNext) (*http.Response, error) {
			resp, err := next(r)
			if resp != nil {
				ah = resp.Header
			}
			return resp, err
		}))
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "scripted-1", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(question))}})
	if err != nil {
		t.Fatalf("anthropic-sdk-go: %v", err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Name != "web_search" || ah.Get("X-Toolgate-Outcome") != "substituted" {
		t.Errorf("anthropic-sdk-go: content %+v, outcome %q", msg.Content, ah.Get("X-Toolgate-Outcome"))
	}

	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "demo", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: base + "/gemini"}})
	if err != nil {
		t.Fatal(err)
	}
	gr, err := gc.Models.GenerateContent(ctx, "scripted-1", genai.Text(question), nil)
	if err != nil {
		t.Fatalf("genai: %v", err)
	}
	fc := gr.FunctionCalls()
	var outcome string
	if gr.SDKHTTPResponse != nil {
		outcome = gr.SDKHTTPResponse.Headers.Get("X-Toolgate-Outcome")
	}
	if len(fc) != 1 || fc[0].Name != "web_search" || outcome != "substituted" {
		t.Errorf("genai: calls %+v, outcome %q", fc, outcome)
	}
}
