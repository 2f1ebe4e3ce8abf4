// Drives an MCP route with the TypeScript SDK v2 client, in the protocol
// era TOOLGATE_MCP_ERA names ("legacy": the 2025-11-25 initialize
// handshake; a date: that revision, pinned), and prints one JSON object of
// what the client saw: the tools listed, a valid call, a call with bad
// arguments and a call a catalog rule refuses. With TOOLGATE_MCP_CONFIRM=1
// it also calls a tool held for confirmation twice, as a client that can
// be asked (elicitation), answering yes and then no.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const url = new URL(process.env.TOOLGATE_MCP_URL);
const era = process.env.TOOLGATE_MCP_ERA;
const mode = era === "legacy" ? "legacy" : { pin: era };

function text(res) {
  return { isError: res.isError === true, text: res.content.map((c) => c.text ?? "").join("") };
}

async function outcome(p) {
  try {
    return text(await p);
  } catch (e) {
    return { code: e.code ?? null, message: String(e.message) };
  }
}

const c = new Client({ name: "ts-v2-client", version: "1" }, { versionNegotiation: { mode } });
await c.connect(new StreamableHTTPClientTransport(url));
const out = { server: c.getServerVersion()?.name ?? null, protocol: c.getNegotiatedProtocolVersion?.() ?? null };
out.tools = (await c.listTools()).tools.map((t) => t.name).sort();
out.valid = await outcome(c.callTool({ name: "lookup_order", arguments: { order_id: "ord_7" } }));
out.schema = await outcome(c.callTool({ name: "lookup_order", arguments: { order_id: 42 } }));
out.rule = await outcome(c.callTool({ name: "issue_refund", arguments: { order_id: "ord_1", amount_cents: 200000 } }));
await c.close();

if (process.env.TOOLGATE_MCP_CONFIRM === "1") {
  const answers = [true, false];
  const asker = new Client(
    { name: "ts-v2-client", version: "1" },
    { versionNegotiation: { mode }, capabilities: { elicitation: {} } },
  );
  asker.setRequestHandler("elicitation/create", async (req) => {
    out.question = req.params.message;
    return answers.shift() ? { action: "accept", content: { confirm: true } } : { action: "decline" };
  });
  await asker.connect(new StreamableHTTPClientTransport(url));
  out.confirmYes = await outcome(asker.callTool({ name: "cancel_order", arguments: { order_id: "ord_9" } }));
  out.confirmNo = await outcome(asker.callTool({ name: "cancel_order", arguments: { order_id: "ord_8" } }));
  await asker.close();
}
process.stdout.write(JSON.stringify(out) + "\n");
