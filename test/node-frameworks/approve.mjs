// An app on the OpenAI Agents SDK whose refund tool needs a person's yes
// (SPEC §5a). The first run ends in the escalation; a person reads the
// held call through the admin API and approves it; the app runs again
// with X-Toolgate-Approval on its first request only, and toolgate
// releases the call the person saw, which the agent then runs.
//
// Env: TOOLGATE_BASE (the proxy), TOOLGATE_ADMIN (the admin listener),
// TOOLGATE_API (chat or responses). Prints one JSON line.
import OpenAI from 'openai';
import { Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, run, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';

setTracingDisabled(true);

const base = process.env.TOOLGATE_BASE;
const admin = process.env.TOOLGATE_ADMIN;
const api = process.env.TOOLGATE_API;

// approval is sent once, on the next request: the retry of the request
// that was held. The agent's later requests (with the tool's result) are
// new requests and go without it.
let approval = null;
const client = new OpenAI({
  baseURL: `${base}/v1`,
  apiKey: 'sk-test',
  fetch: (url, init) => {
    if (approval) {
      const headers = new Headers(init?.headers);
      headers.set('X-Toolgate-Approval', approval);
      approval = null;
      init = { ...init, headers };
    }
    return fetch(url, init);
  },
});

const runs = [];
const refund = tool({
  name: 'issue_refund',
  description: 'Refund an order',
  parameters: z.object({ order_id: z.string(), amount_cents: z.number().int() }),
  execute: async (args) => {
    runs.push(args);
    return 'refunded';
  },
});
const model = api === 'chat' ? new OpenAIChatCompletionsModel(client, 'gpt-4o') : new OpenAIResponsesModel(client, 'gpt-4o');
const agent = new Agent({ name: 'refunds', instructions: 'Refund with the tool.', model, tools: [refund] });
const question = 'Refund order ord_1, 5 dollars.';

const out = { runs };
try {
  await run(agent, question);
  out.first = 'no escalation';
} catch (err) {
  out.first_status = err?.status;
  out.approval_id = err?.error?.escalation?.approval?.id;
}
if (out.approval_id) {
  const auth = { Authorization: 'Bearer admin-token' };
  const shown = await (await fetch(`${admin}/approvals/${out.approval_id}`, { headers: auth })).json();
  out.seen_arguments = shown.arguments;
  const decided = await fetch(`${admin}/approvals/${out.approval_id}`, {
    method: 'POST',
    headers: { ...auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ decision: 'approve', by: 'ana@example.com' }),
  });
  out.decision_status = decided.status;
  approval = out.approval_id;
  try {
    const result = await run(agent, question);
    out.text = result.finalOutput;
  } catch (err) {
    out.second_error = String(err?.message ?? err);
  }
}
console.log(JSON.stringify(out));
