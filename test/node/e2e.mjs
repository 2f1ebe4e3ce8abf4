// End-to-end check of toolgate through the official openai npm package.
// TOOLGATE_BASE_URL points at a running toolgate whose upstream is scripted
// by the Go test that runs this file (test/node_test.go). Each result is
// printed as one JSON line so that test can read it.
import OpenAI from 'openai';
import { tools } from './tools.mjs';

const base = process.env.TOOLGATE_BASE_URL;
if (!base) {
  console.error('TOOLGATE_BASE_URL is not set');
  process.exit(2);
}

// No retries: the Go test counts upstream calls exactly.
const client = new OpenAI({ baseURL: `${base.replace(/\/+$/, '')}/v1`, apiKey: 'sk-test', maxRetries: 0 });

const ask = (content) =>
  client.chat.completions.create({
    model: 'gpt-4o-2024-08-06',
    messages: [{ role: 'user', content }],
    tools,
    tool_choice: 'auto',
  });

// 1. A call the model gets wrong and toolgate repairs: the agent only ever
// sees a call to a real tool.
const { data, response } = await ask("What's the weather like in Boston today?").withResponse();
console.log(
  JSON.stringify({
    tool_call: data.choices[0].message.tool_calls[0],
    outcome: response.headers.get('x-toolgate-outcome'),
  }),
);

// 2. A call nothing can repair: the SDK raises the 422 escalation.
try {
  await ask('Book me a table for two tonight.');
  console.log(JSON.stringify({ error: 'expected an escalation, got an answer' }));
  process.exit(1);
} catch (err) {
  if (!(err instanceof OpenAI.APIError)) throw err;
  console.log(
    JSON.stringify({
      status: err.status,
      escalation_id: err.error?.escalation?.id,
      code: err.code,
      header_id: err.headers?.get('x-toolgate-escalation-id'),
    }),
  );
}
