package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools below are the ones the 2026-07-28 scenarios call by name:
// diagnostics of the stateless transport (server-stateless) and the
// input_required round trips (input-required-result-*), where the server
// asks for input in its result and the client calls again with the
// answers and the opaque requestState.

// tamperMark is what the tampered-state scenario appends to a
// requestState this server handed out.
const tamperMark = "-TAMPERED"

// stateSeal seals a requestState so that the client cannot change it
// unnoticed; the suite's tampering is an appended suffix, which breaks
// the seal of any state this server minted.
func stateSeal(state string) string { return state + "." + fmt.Sprint(len(state)) }

// stateOpen returns the state sealed by stateSeal, or false when the
// client changed it.
func stateOpen(sealed string) (string, bool) {
	i := strings.LastIndexByte(sealed, '.')
	if i < 0 || strings.HasSuffix(sealed, tamperMark) || fmt.Sprint(i) != sealed[i+1:] {
		return "", false
	}
	return sealed[:i], true
}

var (
	nameForm    = schema(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)
	confirmForm = schema(`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)
	colorForm   = schema(`{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}`)
	contextForm = schema(`{"type":"object","properties":{"context":{"type":"string"}},"required":["context"]}`)
)

// accepted is the content of the elicitation answer under key when the
// user accepted it, else nil.
func accepted(responses mcp.InputResponseMap, key string) map[string]any {
	if r, ok := responses[key].(*mcp.ElicitResult); ok && r != nil && r.Action == "accept" {
		return r.Content
	}
	return nil
}

// sampled is the first text of the sampling answer under key.
func sampled(responses mcp.InputResponseMap, key string) (string, bool) {
	r, ok := responses[key].(*mcp.CreateMessageWithToolsResult)
	if !ok || r == nil {
		return "", false
	}
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			return tc.Text, true
		}
	}
	return "", true
}

func ask(message string, form json.RawMessage) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: message, RequestedSchema: form}
}

func sample(prompt string) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{MaxTokens: 50, Messages: []*mcp.SamplingMessage{{Role: "user", Content: text(prompt)}}}
}

func needInput(state string, reqs mcp.InputRequestMap) *mcp.CallToolResult {
	r := &mcp.CallToolResult{InputRequests: reqs}
	if state != "" {
		r.RequestState = stateSeal(state)
	}
	return r
}

func badState() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState was changed by the client"}
}

func addStatelessTools(s *mcp.Server) {
	addDiagnosticTools(s)
	addInputTools(s)
	addInputRounds(s)
	s.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "Asks for context before it answers."},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if c := accepted(req.Params.InputResponses, "user_context"); c != nil {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{prompt("user", text(fmt.Sprintf("Context: %v", c["context"])))}}, nil
			}
			return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{"user_context": ask("Please provide context for the prompt", contextForm)}}, nil
		})
}

// addDiagnosticTools adds the tools server-stateless probes the
// transport with.
func addDiagnosticTools(s *mcp.Server) {
	tool(s, "test_missing_capability", "Needs the client's sampling capability.", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if c := req.ClientCapabilities(); c != nil && c.Sampling != nil {
			return result(text("The client can sample.")), nil
		}
		data, _ := json.Marshal(mcp.MissingRequiredClientCapabilityData{
			RequiredCapabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}})
		return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
			Message: "this tool needs the sampling capability", Data: data}
	})
	tool(s, "test_streaming_elicitation", "Answers on its response stream with nothing but its result.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return result(text("result only")), nil
	})
	tool(s, "test_logging_tool", "Logs a message, which reaches only a client that asked for a log level.", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "test_logging_tool ran"})
		return result(text("logged")), nil
	})
	// Its region argument is mirrored into an Mcp-Param-Region header,
	// which the server checks against the body.
	s.AddTool(&mcp.Tool{Name: "test_x_mcp_header", Description: "Echoes its region, sent in a header too.",
		InputSchema: schema(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"level":{"type":"integer"}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Region string `json:"region"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return result(text("region=" + args.Region)), nil
		})
	tool(s, "test_trigger_tool_change", "Changes the tool list.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tool(s, "transient_tool", "Added to change the tool list.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return result(), nil
		})
		return result(text("tool list changed")), nil
	})
	tool(s, "test_trigger_prompt_change", "Changes the prompt list.", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.AddPrompt(&mcp.Prompt{Name: "transient_prompt", Description: "Added to change the prompt list."},
			func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{}, nil
			})
		return result(text("prompt list changed")), nil
	})
}

// addInputTools adds the tools that ask for one round of input.
func addInputTools(s *mcp.Server) {
	tool(s, "test_input_required_result_elicitation", "Asks the user's name.", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if name, _ := accepted(req.Params.InputResponses, "user_name")["name"].(string); name != "" {
			return result(text("Hello, " + name + "!")), nil
		}
		return needInput("", mcp.InputRequestMap{"user_name": ask("What is your name?", nameForm)}), nil
	})
	tool(s, "test_input_required_result_sampling", "Asks the client's model a question.", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if answer, ok := sampled(req.Params.InputResponses, "capital_question"); ok {
			return result(text("Sampling response: " + answer)), nil
		}
		return needInput("", mcp.InputRequestMap{"capital_question": sample("What is the capital of France?")}), nil
	})
	tool(s, "test_input_required_result_list_roots", "Asks the client's roots.", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["client_roots"].(*mcp.ListRootsResult); ok && r != nil {
			return result(text(fmt.Sprintf("The client has %d root(s).", len(r.Roots)))), nil
		}
		return needInput("", mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}}), nil
	})
	tool(s, "test_input_required_result_request_state", "Asks for a confirmation and carries state.", confirmed("request_state"))
	tool(s, "test_input_required_result_tampered_state", "Asks for a confirmation and refuses a changed state.", confirmed("tampered_state"))
	tool(s, "test_input_required_result_capabilities", "Asks only for the input the client can give.", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if len(req.Params.InputResponses) > 0 {
			return result(text("input received")), nil
		}
		reqs := mcp.InputRequestMap{}
		if c := req.ClientCapabilities(); c != nil {
			if c.Elicitation != nil {
				reqs["user_name"] = ask("What is your name?", nameForm)
			}
			if c.Sampling != nil {
				reqs["greeting"] = sample("Write a short greeting")
			}
			if c.RootsV2 != nil || c.Roots.ListChanged {
				reqs["client_roots"] = &mcp.ListRootsParams{}
			}
		}
		if len(reqs) == 0 {
			return result(text("The client declared no capability to ask with.")), nil
		}
		return needInput("", reqs), nil
	})
}

// confirmed asks for a confirmation with state and answers once the
// confirmation comes back with that state unchanged.
func confirmed(state string) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState != "" {
			if got, ok := stateOpen(req.Params.RequestState); !ok || got != state {
				return nil, badState()
			}
			if accepted(req.Params.InputResponses, "confirm") != nil {
				return result(text("state-ok: confirmed")), nil
			}
		}
		return needInput(state, mcp.InputRequestMap{"confirm": ask("Please confirm", confirmForm)}), nil
	}
}

// addInputRounds adds the tools that ask for several inputs at once or
// in several rounds.
func addInputRounds(s *mcp.Server) {
	tool(s, "test_input_required_result_multiple_inputs", "Asks a name, a greeting and the roots at once.", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		in := req.Params.InputResponses
		name, _ := accepted(in, "user_name")["name"].(string)
		greeting, sampledOK := sampled(in, "greeting")
		roots, rootsOK := in["client_roots"].(*mcp.ListRootsResult)
		if name != "" && sampledOK && rootsOK && roots != nil {
			return result(text(fmt.Sprintf("%s %s, %d root(s)", greeting, name, len(roots.Roots)))), nil
		}
		return needInput("multiple_inputs", mcp.InputRequestMap{
			"user_name":    ask("What is your name?", nameForm),
			"greeting":     sample("Write a greeting"),
			"client_roots": &mcp.ListRootsParams{},
		}), nil
	})
	// The rounds live in the state: a stateless server remembers nothing
	// between calls.
	tool(s, "test_input_required_result_multi_round", "Asks a name, then a colour.", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Params.RequestState == "" {
			return needInput("round=1", mcp.InputRequestMap{"step1": ask("Step 1: What is your name?", nameForm)}), nil
		}
		state, ok := stateOpen(req.Params.RequestState)
		if !ok {
			return nil, badState()
		}
		if state == "round=1" {
			name, _ := accepted(req.Params.InputResponses, "step1")["name"].(string)
			return needInput("round=2;name="+name, mcp.InputRequestMap{"step2": ask("Step 2: What is your favourite colour?", colorForm)}), nil
		}
		name, ok := strings.CutPrefix(state, "round=2;name=")
		if !ok {
			return nil, badState()
		}
		color, _ := accepted(req.Params.InputResponses, "step2")["color"].(string)
		return result(text(fmt.Sprintf("Multi-round complete: %s likes %s", name, color))), nil
	})
}
