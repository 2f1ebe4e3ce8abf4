// LangChain's ChatOpenAI with its default retries against a model whose
// call never passes: LangChain's AsyncCaller retries every status outside a
// fixed list that lacks 422, and ignores x-should-retry. The Go test that
// runs this file (test/langchain_escalation_test.go) checks that the
// escalation still reaches the app within seconds and costs the model once.
// The result is printed as one JSON line.
import { ChatOpenAI } from '@langchain/openai';
import { tools } from './tools.mjs';

const base = process.env.TOOLGATE_BASE_URL;
if (!base) {
  console.error('TOOLGATE_BASE_URL is not set');
  process.exit(2);
}

// No maxRetries anywhere: LangChain's defaults are what is under test.
const model = new ChatOpenAI({
  model: 'gpt-4o-2024-08-06',
  apiKey: 'sk-test',
  configuration: { baseURL: `${base.replace(/\/+$/, '')}/v1` },
});

const start = Date.now();
try {
  const msg = await model.bindTools(tools).invoke("What's the weather like in Boston today?");
  console.log(JSON.stringify({ ok: true, tool_calls: msg.tool_calls ?? [], elapsed_ms: Date.now() - start }));
} catch (err) {
  console.log(
    JSON.stringify({
      ok: false,
      name: err?.name ?? null,
      status: err?.status ?? null,
      escalation_id: err?.error?.escalation?.id ?? null,
      message: String(err?.message ?? err),
      elapsed_ms: Date.now() - start,
    }),
  );
}
