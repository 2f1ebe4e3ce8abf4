// @anthropic-ai/sdk with a hand-written tool loop on messages.create or
// messages.stream.
import Anthropic from '@anthropic-ai/sdk';
import { question, weatherDescription, weatherJSONSchema } from './tools.mjs';

export async function run(c, weather) {
  // The SDK's default retries stay on: an escalation must not be retried.
  const client = new Anthropic({ baseURL: c.base, apiKey: 'sk-ant-test' });
  const tools = [{ name: 'get_current_weather', description: weatherDescription, input_schema: weatherJSONSchema }];
  const messages = [{ role: 'user', content: question }];
  for (let step = 0; step < 5; step++) {
    const params = { model: 'claude-sonnet-4-5', max_tokens: 1024, tools, messages };
    const msg = c.stream ? await client.messages.stream(params).finalMessage() : await client.messages.create(params);
    messages.push({ role: 'assistant', content: msg.content });
    const uses = msg.content.filter((b) => b.type === 'tool_use');
    if (msg.stop_reason !== 'tool_use' || uses.length === 0) {
      return msg.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
    }
    const results = [];
    for (const u of uses) {
      if (u.name !== 'get_current_weather') throw new Error(`the model called ${u.name}`);
      results.push({ type: 'tool_result', tool_use_id: u.id, content: await weather(u.input) });
    }
    messages.push({ role: 'user', content: results });
  }
  throw new Error('no answer in 5 steps');
}

// caught is what the app sees: an APIError whose error field is the whole
// Messages error body.
export function caught(err) {
  return {
    class: err?.constructor?.name,
    status: err?.status,
    escalation_id: err?.error?.error?.escalation?.id,
    where: 'err.error.error.escalation.id',
    message: String(err?.message ?? err),
  };
}
