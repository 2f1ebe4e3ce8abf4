package test

// The wire shapes of the four model APIs that the tracing tests script:
// a request, an answer with tool calls (whole or streamed) and a text
// answer (a re-query's decision), each in its API's own format.

import (
	"encoding/json"
	"fmt"
	"strings"
)

type traceWire struct {
	name string
	// path is the route for a whole or a streamed answer.
	path func(stream bool) string
	// request is the client's body, carrying text as the user's words.
	request func(text string, stream bool) string
	// calls answers with calls, whole or as an event stream.
	calls func(stream bool, calls ...call) mockReply
	// text answers with text, whole.
	text func(s string) mockReply
}

func jsonQ(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func sseReply(events ...string) mockReply {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e)
		b.WriteString("\n\n")
	}
	return mockReply{Body: b.String(), Header: map[string]string{"Content-Type": "text/event-stream"}}
}

var traceWires = []traceWire{
	{
		name: "chat",
		path: func(bool) string { return "/v1/chat/completions" },
		request: func(text string, stream bool) string {
			return fmt.Sprintf(`{"model":"gpt-4o","messages":[{"role":"user","content":%s}],"stream":%v}`, jsonQ(text), stream)
		},
		calls: func(stream bool, calls ...call) mockReply {
			if !stream {
				return mockReply{Body: answerOf("chatcmpl-1", 50, 10, choice{Calls: calls})}
			}
			head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[`
			var ev []string
			for i, c := range calls {
				ev = append(ev, "data: "+head+fmt.Sprintf(`{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}]},"finish_reason":null}]}`,
					i, c.ID, c.Name, jsonQ(c.Args)))
			}
			ev = append(ev, "data: "+head+`{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				"data: "+head+`],"usage":{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60}}`, "data: [DONE]")
			return sseReply(ev...)
		},
		text: func(s string) mockReply { return mockReply{Body: answerOf("chatcmpl-2", 60, 20, choice{Text: s})} },
	},
	{
		name: "messages",
		path: func(bool) string { return "/v1/messages" },
		request: func(text string, stream bool) string {
			return fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":512,"messages":[{"role":"user","content":%s}],"stream":%v}`, jsonQ(text), stream)
		},
		calls: func(stream bool, calls ...call) mockReply {
			if !stream {
				var blocks []string
				for _, c := range calls {
					blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, c.ID, c.Name, c.Args))
				}
				return mockReply{Body: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
					strings.Join(blocks, ",") + `],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":50,"output_tokens":10}}`}
			}
			ev := []string{`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":50,"output_tokens":1}}}`}
			for i, c := range calls {
				ev = append(ev,
					fmt.Sprintf("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"tool_use\",\"id\":%q,\"name\":%q,\"input\":{}}}", i, c.ID, c.Name),
					fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":%s}}", i, jsonQ(c.Args)),
					fmt.Sprintf("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":%d}", i))
			}
			ev = append(ev, `event: message_delta`+"\n"+`data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":10}}`,
				`event: message_stop`+"\n"+`data: {"type":"message_stop"}`)
			return sseReply(ev...)
		},
		text: func(s string) mockReply {
			return mockReply{Body: `{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":` +
				jsonQ(s) + `}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":60,"output_tokens":20}}`}
		},
	},
	{
		name: "responses",
		path: func(bool) string { return "/v1/responses" },
		request: func(text string, stream bool) string {
			return fmt.Sprintf(`{"model":"gpt-4o","input":%s,"store":false,"stream":%v}`, jsonQ(text), stream)
		},
		calls: func(stream bool, calls ...call) mockReply {
			var items []string
			for i, c := range calls {
				items = append(items, fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":%q,"name":%q,"arguments":%s,"status":"completed"}`, i, c.ID, c.Name, jsonQ(c.Args)))
			}
			whole := `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-4o","output":[` +
				strings.Join(items, ",") + `],"usage":{"input_tokens":50,"output_tokens":10,"total_tokens":60}}`
			if !stream {
				return mockReply{Body: whole}
			}
			seq := 0
			ev := func(typ, rest string) string {
				seq++
				return fmt.Sprintf("event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}", typ, typ, seq, rest)
			}
			out := []string{ev("response.created", `"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"gpt-4o","output":[]}`)}
			for i, c := range calls {
				open := fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":%q,"name":%q,"arguments":"","status":"in_progress"}`, i, c.ID, c.Name)
				out = append(out,
					ev("response.output_item.added", fmt.Sprintf(`"output_index":%d,"item":%s`, i, open)),
					ev("response.function_call_arguments.delta", fmt.Sprintf(`"item_id":"fc_%d","output_index":%d,"delta":%s`, i, i, jsonQ(c.Args))),
					ev("response.function_call_arguments.done", fmt.Sprintf(`"item_id":"fc_%d","output_index":%d,"arguments":%s`, i, i, jsonQ(c.Args))),
					ev("response.output_item.done", fmt.Sprintf(`"output_index":%d,"item":%s`, i, items[i])))
			}
			out = append(out, ev("response.completed", `"response":`+whole))
			return sseReply(out...)
		},
		text: func(s string) mockReply {
			return mockReply{Body: `{"id":"resp_2","object":"response","created_at":1,"status":"completed","model":"gpt-4o","output":[{"type":"message","id":"msg_2","status":"completed","role":"assistant","content":[{"type":"output_text","text":` +
				jsonQ(s) + `,"annotations":[]}]}],"usage":{"input_tokens":60,"output_tokens":20,"total_tokens":80}}`}
		},
	},
	{
		name: "gemini",
		path: func(stream bool) string {
			if stream {
				return "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
			}
			return "/v1beta/models/gemini-2.5-flash:generateContent"
		},
		request: func(text string, _ bool) string {
			return fmt.Sprintf(`{"contents":[{"role":"user","parts":[{"text":%s}]}]}`, jsonQ(text))
		},
		calls: func(stream bool, calls ...call) mockReply {
			var parts []string
			for _, c := range calls {
				parts = append(parts, fmt.Sprintf(`{"functionCall":{"id":%q,"name":%q,"args":%s}}`, c.ID, c.Name, c.Args))
			}
			body := `{"candidates":[{"content":{"role":"model","parts":[` + strings.Join(parts, ",") +
				`]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":10,"totalTokenCount":60},"modelVersion":"gemini-2.5-flash-001"}`
			if stream {
				return sseReply("data: " + body)
			}
			return mockReply{Body: body}
		},
		text: func(s string) mockReply {
			return mockReply{Body: `{"candidates":[{"content":{"role":"model","parts":[{"text":` + jsonQ(s) +
				`}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":60,"candidatesTokenCount":20,"totalTokenCount":80},"modelVersion":"gemini-2.5-flash-001"}`}
		},
	},
}
