// Command mcpconformance is the MCP server the official conformance suite
// (@modelcontextprotocol/conformance, server scenarios) is run against,
// directly and through toolgate. It is written with the Go SDK and serves
// every tool, resource and prompt the scenarios ask for, on
// 127.0.0.1:$PORT at /mcp, until it gets SIGINT or SIGTERM.
//
// By default it serves with sessions (the 2025-11-25 revision and
// before). With MCP_STATELESS=1 it serves statelessly, as the 2026-07-28
// revision wants: no initialize, no Mcp-Session-Id, input asked of the
// client in input_required results (stateless.go).
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A 1x1 red PNG and a silent 8-sample WAV: the smallest media the image
// and audio scenarios accept.
var (
	redPixel, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	silence, _  = base64.StdEncoding.DecodeString("UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQgAAAAAAAAAAAAAAA==")
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "3001"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		log.Fatal(err)
	}
	srv := newServer()
	// The event store lets a client resume a stream the server closed
	// (test_reconnection) with Last-Event-ID.
	opts := &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}
	if os.Getenv("MCP_STATELESS") == "1" {
		addStatelessTools(srv)
		// A stateless server keeps no stream to resume.
		opts = &mcp.StreamableHTTPOptions{Stateless: true}
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	fmt.Printf("serving MCP at http://%s/mcp\n", ln.Addr())
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "toolgate-conformance-target", Version: "1.0.0"}, &mcp.ServerOptions{
		CompletionHandler:  complete,
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		Capabilities: &mcp.ServerCapabilities{
			Logging:     &mcp.LoggingCapabilities{},
			Completions: &mcp.CompletionCapabilities{},
		},
	})
	addContentTools(s)
	addActivityTools(s)
	addElicitationTools(s)
	addResources(s)
	addPrompts(s)
	return s
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

const noArgs = `{"type":"object","properties":{}}`

func text(s string) *mcp.TextContent { return &mcp.TextContent{Text: s} }

func result(c ...mcp.Content) *mcp.CallToolResult { return &mcp.CallToolResult{Content: c} }

// tool adds a tool without arguments.
func tool(s *mcp.Server, name, desc string, h mcp.ToolHandler) {
	s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: schema(noArgs)}, h)
}

func addContentTools(s *mcp.Server) {
	tool(s, "test_simple_text", "Returns one text block.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return result(text("This is a simple text response for testing.")), nil
	})
	tool(s, "test_image_content", "Returns a 1x1 PNG.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return result(&mcp.ImageContent{Data: redPixel, MIMEType: "image/png"}), nil
	})
	tool(s, "test_audio_content", "Returns a short silent WAV.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return result(&mcp.AudioContent{Data: silence, MIMEType: "audio/wav"}), nil
	})
	tool(s, "test_embedded_resource", "Returns an embedded text resource.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return result(&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}}), nil
	})
	tool(s, "test_multiple_content_types", "Returns text, an image and a resource.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return result(text("Multiple content types test:"),
			&mcp.ImageContent{Data: redPixel, MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}}), nil
	})
	tool(s, "test_error_handling", "Always fails, as an error result.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("This tool intentionally returns an error for testing")}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "json_schema_2020_12_tool", Description: "Tool with JSON Schema 2020-12 features",
		InputSchema: schema(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
			`"$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},` +
			`"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},` +
			`"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},` +
			`"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],` +
			`"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},` +
			`"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return result(text("ok")), nil
		})
}

// pause waits d unless the call is cancelled first.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func addActivityTools(s *mcp.Server) {
	tool(s, "test_tool_with_logging", "Logs three messages while it runs.", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				if err := pause(ctx, 50*time.Millisecond); err != nil {
					return nil, err
				}
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: msg})
		}
		return result(text("Tool with logging executed successfully")), nil
	})
	tool(s, "test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		for i, p := range []float64{0, 50, 100} {
			if i > 0 {
				if err := pause(ctx, 50*time.Millisecond); err != nil {
					return nil, err
				}
			}
			if tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p, Total: 100})
			}
		}
		return result(text("Tool with progress executed successfully")), nil
	})
	s.AddTool(&mcp.Tool{Name: "test_sampling", Description: "Asks the client's model to answer a prompt.",
		InputSchema: schema(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Prompt string `json:"prompt"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 100,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: text(args.Prompt)}}})
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("sampling failed: " + err.Error())}}, nil
			}
			answer := ""
			if tc, ok := res.Content.(*mcp.TextContent); ok {
				answer = tc.Text
			}
			return result(text("LLM response: " + answer)), nil
		})
	tool(s, "test_reconnection", "Closes its SSE stream before it answers, so the client resumes.", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil && req.Extra.CloseSSEStream != nil {
			req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 500 * time.Millisecond})
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
		return result(text("Reconnection test completed successfully")), nil
	})
}

// elicit asks the client for a form and reports what it answered.
func elicit(ctx context.Context, req *mcp.CallToolRequest, message string, requested json.RawMessage) (*mcp.CallToolResult, error) {
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: message, RequestedSchema: requested})
	if err != nil {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("elicitation failed: " + err.Error())}}, nil
	}
	content, _ := json.Marshal(res.Content)
	return result(text(fmt.Sprintf("Elicitation completed: action=%s, content=%s", res.Action, content))), nil
}

func addElicitationTools(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "test_elicitation", Description: "Asks the user for a username and an email.",
		InputSchema: schema(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return elicit(ctx, req, args.Message, schema(`{"type":"object","properties":{`+
				`"username":{"type":"string","description":"User's response"},`+
				`"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`))
		})
	tool(s, "test_elicitation_sep1034_defaults", "Asks for a form whose fields all have defaults.", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return elicit(ctx, req, "Please review the defaults", schema(`{"type":"object","properties":{`+
			`"name":{"type":"string","description":"User name","default":"John Doe"},`+
			`"age":{"type":"integer","description":"User age","default":30},`+
			`"score":{"type":"number","description":"User score","default":95.5},`+
			`"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},`+
			`"verified":{"type":"boolean","description":"Verification status","default":true}}}`))
	})
	tool(s, "test_elicitation_sep1330_enums", "Asks for a form with every kind of enum field.", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return elicit(ctx, req, "Please pick options", schema(`{"type":"object","properties":{`+
			`"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},`+
			`"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},`+
			`"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},`+
			`"untitledMulti":{"type":"array","items":{"type":"string","enum":["option1","option2","option3"]}},`+
			`"titledMulti":{"type":"array","items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}}}`))
	})
}

func addResources(s *mcp.Server) {
	s.AddResource(&mcp.Resource{URI: "test://static-text", Name: "static-text", Description: "A static text resource.", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain",
				Text: "This is the content of the static text resource."}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://static-binary", Name: "static-binary", Description: "A 1x1 PNG.", MIMEType: "image/png"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "image/png", Blob: redPixel}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://watched-resource", Name: "watched-resource", Description: "A resource clients subscribe to.", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "watched"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template-data",
		Description: "Data for one id.", MIMEType: "application/json"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
			body, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(body)}}}, nil
		})
}

func prompt(role mcp.Role, c mcp.Content) *mcp.PromptMessage {
	return &mcp.PromptMessage{Role: role, Content: c}
}

func addPrompts(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Description: "A prompt without arguments."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{prompt("user", text("This is a simple prompt for testing."))}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with two arguments.",
		Arguments: []*mcp.PromptArgument{{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				prompt("user", text(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])))}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt that embeds a resource.",
		Arguments: []*mcp.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				prompt("user", &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: req.Params.Arguments["resourceUri"],
					MIMEType: "text/plain", Text: "Embedded resource content for testing."}}),
				prompt("user", text("Please process the embedded resource above."))}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				prompt("user", &mcp.ImageContent{Data: redPixel, MIMEType: "image/png"}),
				prompt("user", text("Please analyze the image above."))}}, nil
		})
}

// complete suggests values for test_prompt_with_arguments' arguments
// that start with what the client typed.
func complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	var values []string
	for _, v := range []string{"paris", "park", "party", "test", "testing"} {
		if strings.HasPrefix(v, req.Params.Argument.Value) {
			values = append(values, v)
		}
	}
	if values == nil {
		values = []string{}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}
