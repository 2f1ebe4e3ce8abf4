// The recorded Gemini answers through toolgate, read by @google/genai.
// TOOLGATE_RECORDED is a JSON object mapping a case name to
// {base, model, stream, request}: a running toolgate whose upstream
// answers with one recording, and the recorded request, sent through the
// SDK with its contents, tools and configuration. Each result is printed
// as one JSON line: the calls (id, name, args), the thought parts, whether
// a thought signature came, the finish reasons, or the ApiError.
import { GoogleGenAI, ApiError } from '@google/genai';

const cases = JSON.parse(process.env.TOOLGATE_RECORDED ?? '{}');

for (const [name, c] of Object.entries(cases)) {
  const ai = new GoogleGenAI({ apiKey: 'k', httpOptions: { baseUrl: c.base, apiVersion: 'v1beta' } });
  const req = c.request;
  const config = { tools: req.tools, toolConfig: req.toolConfig, systemInstruction: req.systemInstruction };
  if (req.generationConfig?.thinkingConfig) config.thinkingConfig = req.generationConfig.thinkingConfig;
  const params = { model: c.model, contents: req.contents, config };
  const out = { case: name, chunks: 0, calls: [], thoughts: 0, signed: false, finish: [] };
  const collect = (resp) => {
    out.chunks++;
    for (const cand of resp.candidates ?? []) {
      for (const p of cand.content?.parts ?? []) {
        if (p.thought) out.thoughts++;
        if (p.thoughtSignature) out.signed = true;
        if (p.functionCall) out.calls.push([p.functionCall.id ?? '', p.functionCall.name, JSON.stringify(p.functionCall.args ?? null)].join(' '));
      }
      if (cand.finishReason) out.finish.push(cand.finishReason);
    }
  };
  try {
    if (c.stream) {
      for await (const chunk of await ai.models.generateContentStream(params)) collect(chunk);
    } else {
      collect(await ai.models.generateContent(params));
    }
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    out.error = { status: err.status };
  }
  console.log(JSON.stringify(out));
}
