// toolgate's Gemini stream through @google/generative-ai 0.24.1, the
// package under LangChain's Gemini model: the model says some text, then
// calls a tool toolgate escalates. That package takes an `{"error":…}`
// element for an answer with no candidates and drops it, so the app must
// see the escalation some other way. TOOLGATE_BASE_URL is the running
// toolgate; the result is printed as one JSON line for the Go test
// (test/gemini_generativeai_test.go).
import { GoogleGenerativeAI } from '@google/generative-ai';

const base = process.env.TOOLGATE_BASE_URL;
if (!base) {
  console.error('TOOLGATE_BASE_URL is not set');
  process.exit(2);
}

const genAI = new GoogleGenerativeAI('gem-client-key');
const model = genAI.getGenerativeModel(
  {
    model: 'gemini-2.5-flash',
    tools: [
      {
        functionDeclarations: [
          {
            name: 'get_current_weather',
            description: 'Get the current weather in a given location',
            parameters: { type: 'OBJECT', properties: { location: { type: 'STRING' } }, required: ['location'] },
          },
        ],
      },
    ],
  },
  { baseUrl: base.replace(/\/+$/, ''), apiVersion: 'v1beta' },
);

const out = { chunks: [], text: '', final_text: null, error: null };
try {
  const result = await model.generateContentStream("What's the weather like in Boston today?");
  for await (const chunk of result.stream) {
    const t = chunk.text();
    out.chunks.push(t);
    out.text += t;
  }
  out.final_text = (await result.response).text();
} catch (err) {
  out.error = String(err?.message ?? err);
}
console.log(JSON.stringify(out));
