// Drives toolgate's MCP route with the official MCP TypeScript SDK as the
// client and prints one JSON object of what the client saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const url = new URL(process.env.TOOLGATE_MCP_URL);
const deadURL = new URL(process.env.TOOLGATE_MCP_DEAD_URL);
const out = {};

async function connect(answer) {
  const caps = answer === undefined ? {} : { elicitation: {} };
  const c = new Client({ name: "ts-client", version: "1" }, { capabilities: caps });
  if (answer !== undefined) {
    c.setRequestHandler(ElicitRequestSchema, async (req) => {
      out.question = req.params.message;
      return answer ? { action: "accept", content: { confirm: true } } : { action: "decline" };
    });
  }
  await c.connect(new StreamableHTTPClientTransport(url));
  return c;
}

function text(res) {
  return { isError: res.isError === true, text: res.content.map((c) => c.text ?? "").join("") };
}

async function refused(p) {
  try {
    await p;
    return { code: null };
  } catch (e) {
    return { code: e.code ?? null, message: String(e.message) };
  }
}

const c = await connect();
out.server = c.getServerVersion().name;

let cursor;
out.pages = 0;
out.tools = [];
do {
  const res = await c.listTools(cursor ? { cursor } : {});
  out.pages++;
  out.tools.push(...res.tools.map((t) => t.name));
  cursor = res.nextCursor;
} while (cursor);

const valid = await c.callTool({ name: "lookup_order", arguments: { order_id: "ord_7" } });
out.valid = { ...text(valid), structured: valid.structuredContent };
out.unknown = await refused(c.callTool({ name: "lookup_ordr", arguments: { order_id: "ord_7" } }));
out.schema = text(await c.callTool({ name: "lookup_order", arguments: { order_id: 42 } }));
out.rule = text(await c.callTool({ name: "issue_refund", arguments: { order_id: "ord_1", amount_cents: 200000 } }));
out.output = text(await c.callTool({ name: "count_items", arguments: {} }));
out.confirmUnsupported = text(await c.callTool({ name: "cancel_order", arguments: { order_id: "ord_9" } }));

const yes = await connect(true);
out.confirmYes = text(await yes.callTool({ name: "cancel_order", arguments: { order_id: "ord_9" } }));
const no = await connect(false);
out.confirmNo = text(await no.callTool({ name: "cancel_order", arguments: { order_id: "ord_9" } }));

// list_changed: the server adds a tool; toolgate must judge by the new list.
out.beforeChange = await refused(c.callTool({ name: "track_parcel", arguments: { parcel: "p1" } }));
const changed = new Promise((resolve) => c.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve(true)));
await c.callTool({ name: "open_tracking", arguments: {} });
out.listChanged = await changed;
out.afterChange = text(await c.callTool({ name: "track_parcel", arguments: { parcel: "p1" } }));

// Progress and a log message during a long call, then cancellation.
out.logs = [];
c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => out.logs.push(n.params.level));
await c.setLoggingLevel("debug");
out.progress = [];
const abort = new AbortController();
const long = c.callTool({ name: "export_orders", arguments: {} }, undefined, {
  signal: abort.signal,
  onprogress: (p) => {
    out.progress.push(p.progress);
    if (out.progress.length === 2) abort.abort("enough");
  },
});
out.cancelled = await refused(long);
// The cancellation is a notification of its own; wait until the server has
// it, so that ending the sessions below cannot overtake it.
for (let i = 0; i < 200; i++) {
  const n = text(await c.callTool({ name: "cancelled_exports", arguments: {} })).text;
  if (n !== "0") {
    out.exportCancelled = true;
    break;
  }
  await new Promise((r) => setTimeout(r, 50));
}

// Session expiry: the server forgets its sessions; the SDK sees its 404.
await c.callTool({ name: "end_sessions", arguments: {} });
out.expired = await refused(c.callTool({ name: "issue_refund", arguments: { order_id: "ord_1", amount_cents: 5 } }));

// A server that is down: a JSON-RPC error, no hang.
const dead = new Client({ name: "ts-client", version: "1" });
out.dead = await refused(dead.connect(new StreamableHTTPClientTransport(deadURL)));

console.log(JSON.stringify(out));
process.exit(0);
