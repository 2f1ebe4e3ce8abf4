package test

// Strict mode end to end through the official Go SDKs (openai-go for Chat
// Completions and Responses, anthropic-sdk-go, google.golang.org/genai),
// plain and streamed: the SDK's request reaches the enforcing upstream
// with the fitting tools marked, and the SDK reads the judged call.

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"google.golang.org/genai"
)

// strictSDKCase checks what the rig's upstream received and what the SDK
// read: one call of fits with the city Oslo.
func strictSDKCase(t *testing.T, r *strictRig, want []string, name, args string) {
	t.Helper()
	reqs := r.u.requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests, want 1", len(reqs))
	}
	if got := r.api.marked(t, reqs[0].Body); !sameNames(got, want) {
		t.Errorf("marked %v, want %v: %s", got, want, reqs[0].Body)
	}
	if name != "fits" || !sameJSON(args, `{"city":"Oslo"}`) {
		t.Errorf("the SDK read %s(%s), want fits({\"city\":\"Oslo\"})", name, args)
	}
}

func strictRigFor(t *testing.T, api strictAPI, stream bool) *strictRig {
	return newStrictRig(t, api, strictAuto, stream, func(int) (string, string) { return "fits", `{"city":"Oslo"}` })
}

func schemaMap(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestStrictThroughOpenAIGoChat(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			r := strictRigFor(t, strictChat, stream)
			params := openai.ChatCompletionNewParams{
				Model:    "gpt-4o",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Oslo?")},
				Tools: []openai.ChatCompletionToolUnionParam{
					openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "fits", Parameters: schemaMap(t, strictFits)}),
					openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "unfit", Parameters: schemaMap(t, strictUnfit)}),
				},
			}
			client := newClient(r.g.URL)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var name, args string
			if stream {
				s := client.Chat.Completions.NewStreaming(ctx, params)
				var acc openai.ChatCompletionAccumulator
				for s.Next() {
					acc.AddChunk(s.Current())
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				name, args = acc.Choices[0].Message.ToolCalls[0].Function.Name, acc.Choices[0].Message.ToolCalls[0].Function.Arguments
			} else {
				c, err := client.Chat.Completions.New(ctx, params)
				if err != nil {
					t.Fatal(err)
				}
				name, args = c.Choices[0].Message.ToolCalls[0].Function.Name, c.Choices[0].Message.ToolCalls[0].Function.Arguments
			}
			strictSDKCase(t, r, []string{"fits"}, name, args)
		})
	}
}

func TestStrictThroughOpenAIGoResponses(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			r := strictRigFor(t, strictResponses, stream)
			params := responses.ResponseNewParams{
				Model: "gpt-5",
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Oslo?")},
				Tools: []responses.ToolUnionParam{
					// No strict set: the SDK leaves the choice open.
					{OfFunction: &responses.FunctionToolParam{Name: "fits", Parameters: schemaMap(t, strictFits)}},
					{OfFunction: &responses.FunctionToolParam{Name: "unfit", Parameters: schemaMap(t, strictUnfit)}},
				},
			}
			out, _, _, err := respRun(t, respClient(r.g.URL), params, stream)
			if err != nil {
				t.Fatal(err)
			}
			var item struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			}
			if len(out.Output) == 0 {
				t.Fatal("no output items")
			}
			if err := json.Unmarshal(out.Output[0], &item); err != nil {
				t.Fatal(err)
			}
			strictSDKCase(t, r, []string{"fits"}, item.Name, item.Arguments)
		})
	}
}

func TestStrictThroughAnthropicSDK(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			r := strictRigFor(t, strictMessages, stream)
			params := anthropic.MessageNewParams{
				Model:     "claude-sonnet-4-5",
				MaxTokens: 1024,
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Oslo?"))},
				Tools: []anthropic.ToolUnionParam{
					{OfTool: &anthropic.ToolParam{Name: "fits", InputSchema: anthropic.ToolInputSchemaParam{
						Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"},
						ExtraFields: map[string]any{"additionalProperties": false}}}},
					{OfTool: &anthropic.ToolParam{Name: "unfit", InputSchema: anthropic.ToolInputSchemaParam{
						Properties: map[string]any{"q": map[string]any{"type": "string", "minLength": 1}}, Required: []string{"q"}}}},
				},
			}
			msg, _, err := anthCall(t, r.g.URL, params, stream)
			if err != nil {
				t.Fatal(err)
			}
			uses := anthToolUses(t, msg)
			if len(uses) != 1 {
				t.Fatalf("tool uses %v", uses)
			}
			strictSDKCase(t, r, []string{"fits"}, uses[0][1], uses[0][2])
		})
	}
}

func TestStrictThroughGenAI(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			r := strictRigFor(t, strictGemini, stream)
			cfg := &genai.GenerateContentConfig{Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
				{Name: "fits", ParametersJsonSchema: schemaMap(t, strictFits)},
				{Name: "fits2", ParametersJsonSchema: schemaMap(t, strictFits2)},
			}}}}
			res := gemCall(t, r.g.URL, cfg, stream)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			resp := res.Resp
			if stream {
				resp = res.Chunks[len(res.Chunks)-1]
			}
			fc := resp.FunctionCalls()
			if len(fc) != 1 {
				t.Fatalf("function calls %v", fc)
			}
			args, _ := json.Marshal(fc[0].Args)
			strictSDKCase(t, r, []string{"fits", "fits2"}, fc[0].Name, string(args))
		})
	}
}
