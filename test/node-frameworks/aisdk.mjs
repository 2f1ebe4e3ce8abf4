// The AI SDK: generateText and streamText with a multi-step stop, on
// @ai-sdk/openai (chat and responses) and @ai-sdk/anthropic.
import { generateText, stepCountIs, streamText, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { question, weatherDescription, weatherSchema } from './tools.mjs';

function model(c) {
  switch (c.api) {
    case 'chat':
      return createOpenAI({ baseURL: `${c.base}/v1`, apiKey: 'sk-test' }).chat('gpt-4o');
    case 'responses':
      return createOpenAI({ baseURL: `${c.base}/v1`, apiKey: 'sk-test' }).responses('gpt-4o');
    case 'messages':
      return createAnthropic({ baseURL: `${c.base}/v1`, apiKey: 'sk-ant-test' })('claude-sonnet-4-5');
  }
  throw new Error(`unknown api ${c.api}`);
}

export async function run(c, weather) {
  // maxRetries stays at the SDK's default (2): an escalation must not be
  // retried.
  const args = {
    model: model(c),
    prompt: question,
    tools: { get_current_weather: tool({ description: weatherDescription, inputSchema: weatherSchema, execute: weather }) },
    stopWhen: stepCountIs(5),
  };
  if (!c.stream) {
    const result = await generateText(args);
    return result.text;
  }
  // An app reads streamText's errors from the stream: they are parts of
  // it, not thrown.
  const result = streamText({ ...args, onError: () => {} });
  let text = '';
  for await (const part of result.fullStream) {
    if (part.type === 'error') throw part.error;
    if (part.type === 'text-delta') text += part.text;
  }
  return text;
}

// caught is what the app sees. A plain 422 is an APICallError whose
// responseBody is toolgate's body. An error inside a stream is an error
// part: on the Responses provider an object whose data is the whole event;
// on the Chat and Messages providers the error object reduced to the
// fields the provider knows, so only the message's [toolgate:esc_…] tag
// still names the escalation.
export function caught(err) {
  let body;
  try {
    body = JSON.parse(err?.responseBody ?? '');
  } catch {
    body = undefined;
  }
  const tag = /\[toolgate:(esc_[A-Za-z0-9_-]+)\]/.exec(String(err?.message ?? ''))?.[1];
  let id, where;
  if (body?.error?.escalation?.id) {
    [id, where] = [body.error.escalation.id, 'JSON.parse(err.responseBody).error.escalation.id'];
  } else if (err?.data?.error?.escalation?.id) {
    [id, where] = [err.data.error.escalation.id, 'err.data.error.escalation.id'];
  } else if (tag) {
    [id, where] = [tag, 'err.message [toolgate:esc_…] tag'];
  }
  return {
    class: err?.constructor?.name,
    status: err?.statusCode,
    retryable: err?.isRetryable,
    escalation_id: id,
    where,
    message: String(err?.message ?? err),
  };
}
