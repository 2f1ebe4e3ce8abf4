// End-to-end check of toolgate through LangChain's @langchain/openai, the way
// an agent framework uses it: ChatOpenAI pointed at toolgate, tools bound
// with bindTools, one invoke. The Go test that runs this file
// (test/langchain_test.go) scripts the upstream: the model first calls a
// tool that does not exist, toolgate substitutes a real one, and LangChain
// must hand the agent an AIMessage whose tool_calls name only that real tool.
// The result is printed as one JSON line for the Go test to read.
import { ChatOpenAI } from '@langchain/openai';
import { tools } from './tools.mjs';

const base = process.env.TOOLGATE_BASE_URL;
if (!base) {
  console.error('TOOLGATE_BASE_URL is not set');
  process.exit(2);
}

const model = new ChatOpenAI({
  model: 'gpt-4o-2024-08-06',
  apiKey: 'sk-test',
  // No retries, at either layer: the Go test counts upstream calls exactly.
  maxRetries: 0,
  configuration: { baseURL: `${base.replace(/\/+$/, '')}/v1`, maxRetries: 0 },
});

const msg = await model.bindTools(tools).invoke("What's the weather like in Boston today?");

console.log(
  JSON.stringify({
    type: msg.getType(),
    content: msg.content,
    tool_calls: msg.tool_calls ?? [],
    invalid_tool_calls: msg.invalid_tool_calls ?? [],
    response_id: msg.id ?? null,
  }),
);
