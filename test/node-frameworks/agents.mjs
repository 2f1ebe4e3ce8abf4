// The OpenAI Agents SDK, on its Chat Completions model or its Responses
// model, with the openai client pointed at toolgate.
import OpenAI from 'openai';
import {
  Agent,
  OpenAIChatCompletionsModel,
  OpenAIResponsesModel,
  run as runAgent,
  setTracingDisabled,
  tool,
} from '@openai/agents';
import { question, weatherDescription, weatherSchema } from './tools.mjs';

// Traces would go to api.openai.com; the test talks to toolgate only.
setTracingDisabled(true);

export async function run(c, weather) {
  // The SDK's default retries stay on: an escalation must not be retried.
  const client = new OpenAI({ baseURL: `${c.base}/v1`, apiKey: 'sk-test' });
  const model =
    c.api === 'chat' ? new OpenAIChatCompletionsModel(client, 'gpt-4o') : new OpenAIResponsesModel(client, 'gpt-4o');
  const agent = new Agent({
    name: 'weather',
    instructions: 'Answer with the tools.',
    model,
    tools: [tool({ name: 'get_current_weather', description: weatherDescription, parameters: weatherSchema, execute: weather })],
  });
  if (!c.stream) {
    const result = await runAgent(agent, question);
    return result.finalOutput;
  }
  // stage records which step of the streamed run the error came out of,
  // for the table in docs/escalations.md.
  let stage = 'run(…, {stream: true})';
  try {
    const result = await runAgent(agent, question, { stream: true });
    stage = 'the event iteration';
    for await (const _ of result) {
      // Events are what a UI would show; the loop only has to drain them.
    }
    stage = 'result.completed';
    await result.completed;
    stage = 'result.error';
    if (result.error) throw result.error;
    return result.finalOutput;
  } catch (err) {
    throw Object.assign(err, { stage });
  }
}

// caught is what the app sees: the openai client's APIError, which the
// SDK passes on as thrown; its error field is the error object.
export function caught(err) {
  return {
    class: err?.constructor?.name,
    status: err?.status,
    escalation_id: err?.error?.escalation?.id,
    where: 'err.error.escalation.id',
    stage: err?.stage,
    message: String(err?.message ?? err),
  };
}
