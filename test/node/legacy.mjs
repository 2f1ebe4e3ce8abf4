// Chat Completions' legacy form (functions, function_call) through the
// official openai npm package. TOOLGATE_BASE_URL points at a running
// toolgate whose upstream is scripted by the Go test that runs this file
// (test/legacy_test.go); LEGACY_MODE picks the sequence the script expects.
// Each result is printed as one JSON line for that test to read.
import OpenAI from 'openai';
import { tools } from './tools.mjs';

const base = process.env.TOOLGATE_BASE_URL;
const mode = process.env.LEGACY_MODE;
if (!base || !mode) {
  console.error('TOOLGATE_BASE_URL and LEGACY_MODE must be set');
  process.exit(2);
}

// No retries: the Go test counts upstream calls exactly.
const client = new OpenAI({ baseURL: `${base.replace(/\/+$/, '')}/v1`, apiKey: 'sk-test', maxRetries: 0 });
const out = (o) => console.log(JSON.stringify(o));

const weather = {
  model: 'gpt-4o-2024-08-06',
  messages: [{ role: 'user', content: "What's the weather like in Boston today?" }],
  functions: tools.map((t) => t.function),
  function_call: 'auto',
};

const refund = {
  model: 'gpt-4o',
  messages: [{ role: 'user', content: 'Refund order ord_1, 5 dollars.' }],
  functions: [
    {
      name: 'issue_refund',
      description: 'Refund an order',
      parameters: {
        type: 'object',
        properties: { order_id: { type: 'string' }, amount_cents: { type: 'integer', minimum: 1, maximum: 100000 } },
        required: ['order_id', 'amount_cents'],
        additionalProperties: false,
      },
    },
  ],
};

// plain reads the answer's function_call as an agent on the legacy form does.
async function plain(params, options) {
  const { data, response } = await client.chat.completions.create(params, options).withResponse();
  const choice = data.choices[0];
  return {
    function_call: choice.message.function_call ?? null,
    tool_calls: choice.message.tool_calls?.length ?? 0,
    finish: choice.finish_reason,
    outcome: response.headers.get('x-toolgate-outcome'),
  };
}

// streamed joins the function_call deltas: the name first, the arguments
// in fragments.
async function streamed(params, options) {
  const stream = await client.chat.completions.create({ ...params, stream: true }, options);
  let name = '';
  let args = '';
  let toolCalls = 0;
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      const fc = c.delta?.function_call;
      if (fc) {
        name += fc.name ?? '';
        args += fc.arguments ?? '';
      }
      toolCalls += c.delta?.tool_calls?.length ?? 0;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { function_call: name ? { name, arguments: args } : null, tool_calls: toolCalls, finish };
}

// refused runs fn, which must throw the SDK's APIError.
async function refused(fn) {
  try {
    return { error: 'expected an escalation', got: await fn() };
  } catch (err) {
    if (!(err instanceof OpenAI.APIError)) throw err;
    return {
      status: err.status ?? null,
      code: err.code ?? null,
      escalation_id: err.error?.escalation?.id ?? null,
      approval: err.error?.escalation?.approval?.id ?? null,
    };
  }
}

if (mode === 'judge') {
  // 1. A valid call: the upstream's bytes.
  const raw = await client.chat.completions.create(weather).asResponse();
  out({ raw: await raw.text(), outcome: raw.headers.get('x-toolgate-outcome') });
  // 2. A valid call, streamed.
  out(await streamed(weather));
  // 3. An invented function, substituted.
  out(await plain(weather));
  // 4. An invented function, streamed, escalated.
  out(await refused(() => streamed(weather)));
  // 5. Bad arguments, reprompted.
  out(await plain(weather));
  // 6. Bad arguments, streamed, bad again: escalated.
  out(await refused(() => streamed(weather)));
} else if (mode === 'confirm') {
  const admin = process.env.TOOLGATE_ADMIN_URL;
  for (const send of [plain, streamed]) {
    // Held, approved by a person, released once, then refused.
    const held = await refused(() => send(refund));
    out(held);
    const decided = await fetch(`${admin}/approvals/${held.approval}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ decision: 'approve', by: 'ana@example.com', note: 'checked' }),
    });
    out({ decided: decided.status });
    const headers = { 'X-Toolgate-Approval': held.approval };
    out(await send(refund, { headers }));
    out(await refused(() => send(refund, { headers })));
  }
} else {
  console.error(`unknown LEGACY_MODE ${mode}`);
  process.exit(2);
}
