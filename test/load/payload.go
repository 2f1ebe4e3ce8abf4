package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The payloads are the real Chat Completions wire format, taken from the
// recorded fixtures in proxy/testdata/chat: the request offers the two
// fixture tools, the plain answer calls both, and the stream is the
// recorded parallel stream with text deltas in front and a usage chunk at
// the end. Both the mock (to send) and the driver (to verify) use them, so
// the expected bytes can never drift from what was sent.

const chatPath = "/v1/chat/completions"

// requestJSON is proxy/testdata/chat/request.json.
const requestJSON = `{
  "model": "gpt-4o-2024-08-06",
  "messages": [
    {"role": "user", "content": "What's the weather like in Boston today, and what is Apple (AAPL on NASDAQ) trading at?"}
  ],
  "tools": [
    {"type": "function", "function": {"name": "get_current_weather", "description": "Get the current weather in a given location",
      "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}},
    {"type": "function", "function": {"name": "get_stock_price", "description": "Fetch the latest price for a given ticker",
      "parameters": {"type": "object", "properties": {"ticker": {"type": "string", "description": "Ticker symbol, e.g. AAPL"},
        "exchange": {"type": "string", "description": "Exchange the ticker is listed on, e.g. NASDAQ"}}, "required": ["ticker", "exchange"]}}}
  ],
  "tool_choice": "auto",
  "stream": true,
  "stream_options": {"include_usage": true}
}`

// answerJSON is proxy/testdata/chat/parallel_tool_calls.json, byte for byte.
const answerJSON = `{
  "id": "chatcmpl-sWmflzdE1F8ResqEDusTpkr0cStY4",
  "object": "chat.completion",
  "created": 1741569960,
  "model": "gpt-4o-2024-08-06",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": null,
        "tool_calls": [
          {
            "id": "call_xUdl7dXTPyLsxPFkThf4VucS",
            "type": "function",
            "function": {
              "name": "get_current_weather",
              "arguments": "{\"location\": \"Boston, MA\", \"unit\": \"celsius\"}"
            }
          },
          {
            "id": "call_mEHgaKwVJ7faC9qEwjky40UV",
            "type": "function",
            "function": {
              "name": "get_stock_price",
              "arguments": "{\"ticker\": \"AAPL\", \"exchange\": \"NASDAQ\"}"
            }
          }
        ],
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "tool_calls"
    }
  ],
  "usage": {
    "prompt_tokens": 118,
    "completion_tokens": 58,
    "total_tokens": 176,
    "prompt_tokens_details": {
      "cached_tokens": 0,
      "audio_tokens": 0
    },
    "completion_tokens_details": {
      "reasoning_tokens": 0,
      "audio_tokens": 0,
      "accepted_prediction_tokens": 0,
      "rejected_prediction_tokens": 0
    }
  },
  "service_tier": "default",
  "system_fingerprint": "fp_b0eb53f169"
}
`

// catalogYAML is toolgate's catalog for the run: the mock's two tools with
// the request's schemas, so every call is judged by a compiled catalog
// schema in the default intersect mode.
const catalogYAML = `catalog:
  version: load
  tools:
    - name: get_current_weather
      description: Get the current weather in a given location
      parameters: {"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}
    - name: get_stock_price
      description: Fetch the latest price for a given ticker
      parameters: {"type":"object","properties":{"ticker":{"type":"string","description":"Ticker symbol, e.g. AAPL"},"exchange":{"type":"string","description":"Exchange the ticker is listed on, e.g. NASDAQ"}},"required":["ticker","exchange"]}
`

// streamEventCount is what every stream must carry, [DONE] included.
const streamEventCount = 40

// requestBody is the request the driver sends, compacted as an SDK would.
func requestBody(stream bool) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(requestJSON), &m); err != nil {
		panic(err)
	}
	if !stream {
		m["stream"] = json.RawMessage("false")
		delete(m, "stream_options")
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// streamEvents is the 40-event answer: a role chunk, 18 text deltas, two
// tool calls whose arguments come in 8 fragments each (the recorded
// parallel stream's fragments), the finish chunk, the usage chunk and
// [DONE]. Each element is one event with its blank line, as the mock
// writes and flushes it.
func streamEvents() [][]byte {
	const head = `{"id":"chatcmpl-zupGhv7Ib3M03NBQNSgPwlUQia1ID","object":"chat.completion.chunk","created":1741569980,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_bed440e504","choices":[`
	const tail = `,"logprobs":null,"finish_reason":null}]}`
	var out [][]byte
	add := func(data string) { out = append(out, []byte("data: "+data+"\n\n")) }
	str := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	add(head + `{"index":0,"delta":{"role":"assistant","content":null}` + tail)
	words := strings.Fields("Let me check the weather in Boston and the current price of Apple stock on NASDAQ for you right now, one moment.")
	for i := range 18 {
		add(head + `{"index":0,"delta":{"content":` + str(words[i%len(words)]+" ") + `}` + tail)
	}
	calls := []struct {
		id, name string
		frags    []string
	}{
		{"call_LJenuHjDUrhhjeyxG4jDPMRC", "get_current_weather",
			[]string{`{"lo`, `cation": `, `"Bost`, `on, MA`, `", "u`, `nit": "`, `cel`, `sius"}`}},
		{"call_xGgcjBw56EcUngmgMsRcgize", "get_stock_price",
			[]string{`{"ti`, `cker"`, `: "AAP`, `L", `, `"exch`, `ange":`, ` "NAS`, `DAQ"}`}},
	}
	for i, c := range calls {
		add(head + fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":""}}]}`,
			i, str(c.id), str(c.name)) + tail)
		for _, f := range c.frags {
			add(head + fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, str(f)) + tail)
		}
	}
	add(head + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`)
	add(head[:strings.LastIndex(head, `"choices":[`)] + `"choices":[],"usage":{"prompt_tokens":118,"completion_tokens":58,"total_tokens":176}}`)
	add("[DONE]")
	if len(out) != streamEventCount {
		panic(fmt.Sprintf("built %d events, want %d", len(out), streamEventCount))
	}
	return out
}

// textMarker starts the first text delta: the role chunk has
// "content":null, so the first `"content":"` in a stream is the first text
// byte a user would see.
var textMarker = []byte(`"content":"`)

// assembled is what a client SDK builds from a stream.
type assembled struct {
	Events int
	Done   bool
	Text   string
	Calls  []assembledCall
	Finish string
	Usage  bool
	Error  bool
}

type assembledCall struct {
	ID, Name, Args string
}

// assemble reads a stream the way an SDK does: event by event, joining
// text deltas and tool-call fragments by index. It never fails; what is
// missing or malformed shows up as a difference from the expected result.
func assemble(body []byte) assembled {
	var a assembled
	norm := bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	for _, ev := range bytes.Split(norm, []byte("\n\n")) {
		var data []byte
		for _, line := range bytes.Split(ev, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
			}
		}
		if len(data) == 0 {
			continue
		}
		a.Events++
		if string(data) == "[DONE]" {
			a.Done = true
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(data, &ch) != nil {
			a.Error = true
			continue
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			a.Error = true
		}
		if len(ch.Usage) > 0 && string(ch.Usage) != "null" {
			a.Usage = true
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				a.Text += *c.Delta.Content
			}
			for _, tc := range c.Delta.ToolCalls {
				if tc.Index < 0 || tc.Index > 64 {
					a.Error = true
					continue
				}
				for len(a.Calls) <= tc.Index {
					a.Calls = append(a.Calls, assembledCall{})
				}
				ac := &a.Calls[tc.Index]
				if tc.ID != "" {
					ac.ID = tc.ID
				}
				ac.Name += tc.Function.Name
				ac.Args += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				a.Finish = *c.FinishReason
			}
		}
	}
	return a
}

func (a assembled) equal(b assembled) bool {
	if a.Events != b.Events || a.Done != b.Done || a.Text != b.Text || a.Finish != b.Finish ||
		a.Usage != b.Usage || a.Error != b.Error || len(a.Calls) != len(b.Calls) {
		return false
	}
	for i := range a.Calls {
		if a.Calls[i] != b.Calls[i] {
			return false
		}
	}
	return true
}
