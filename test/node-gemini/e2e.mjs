// End-to-end check of toolgate's Gemini routes through the official
// @google/genai npm package. TOOLGATE_GATES is a JSON object mapping a case
// name to the base URL of a running toolgate whose upstream the Go test
// (test/gemini_node_test.go) scripts for that case; a name ending in
// ":stream" streams. Each result is printed as one JSON line.
import { GoogleGenAI, ApiError, Type, FunctionCallingConfigMode } from '@google/genai';

const gates = JSON.parse(process.env.TOOLGATE_GATES ?? '{}');

const tools = [
  {
    functionDeclarations: [
      {
        name: 'get_current_weather',
        description: 'Get the current weather in a given location',
        parameters: {
          type: Type.OBJECT,
          properties: {
            location: { type: Type.STRING, description: 'The city and state, e.g. San Francisco, CA' },
            unit: { type: Type.STRING, format: 'enum', enum: ['celsius', 'fahrenheit'] },
          },
          required: ['location'],
        },
      },
      {
        name: 'get_stock_price',
        description: 'Fetch the latest price for a given ticker',
        parametersJsonSchema: {
          type: 'object',
          properties: { ticker: { type: 'string' }, exchange: { type: 'string' } },
          required: ['ticker'],
          additionalProperties: false,
        },
      },
    ],
  },
];

// The body of an ApiError: the SDK puts the whole error response, JSON
// encoded, in its message (after "got status: …. " for a stream event).
function errorBody(err) {
  const at = err.message.indexOf('{');
  try {
    return JSON.parse(err.message.slice(at));
  } catch {
    return null;
  }
}

// collect gathers what the client sees of one response chunk.
function collect(out, resp) {
  for (const fc of resp.functionCalls ?? []) out.calls.push({ name: fc.name, args: fc.args });
  for (const c of resp.candidates ?? []) {
    for (const p of c.content?.parts ?? []) if (p.text && !p.thought) out.text += p.text;
    if (c.finishReason) out.finish = c.finishReason;
  }
  if (resp.toolgate_escalation) out.toolgate_escalation = resp.toolgate_escalation;
}

for (const [name, base] of Object.entries(gates)) {
  const ai = new GoogleGenAI({ apiKey: 'gem-client-key', httpOptions: { baseUrl: base, apiVersion: 'v1beta' } });
  const params = {
    model: 'gemini-2.5-flash',
    contents: "What's the weather like in Boston today, and what is Apple (AAPL on NASDAQ) trading at?",
    config: { tools, toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.AUTO } } },
  };
  const out = { case: name, calls: [], text: '' };
  try {
    if (name.endsWith(':stream')) {
      for await (const chunk of await ai.models.generateContentStream(params)) collect(out, chunk);
    } else {
      const resp = await ai.models.generateContent(params);
      collect(out, resp);
      out.outcome = resp.sdkHttpResponse?.headers?.['x-toolgate-outcome'];
    }
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    out.error = { status: err.status, body: errorBody(err) };
  }
  console.log(JSON.stringify(out));
}
