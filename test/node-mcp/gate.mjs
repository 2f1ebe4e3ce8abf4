// Runs an MCP server built with the TypeScript SDK (a task tool with an
// outputSchema, a slow tool, an echo tool) on 127.0.0.1:$TOOLGATE_TS_SERVER_PORT,
// then drives it through toolgate ($TOOLGATE_MCP_URL) with the TypeScript
// SDK client: DNS-rebinding probes, a browser-like client from an allowed
// origin, task-augmented calls, and 32 concurrent calls beside the standing
// GET stream. Prints one JSON object of what the client and server saw.
import http from "node:http";
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { InMemoryTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js";
import { CallToolResultSchema, isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";

const gateURL = new URL(process.env.TOOLGATE_MCP_URL);
const port = Number(process.env.TOOLGATE_TS_SERVER_PORT);
const out = { server: { requests: 0, origins: [], createdTasks: 0 } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the server ----------------------------------------------------------
const taskStore = new InMemoryTaskStore();
let openGets = 0;
let maxOpenGets = 0;

function newServer() {
  const s = new McpServer(
    { name: "ts-tasks", version: "1" },
    { capabilities: { tools: {}, tasks: { requests: { tools: { call: {} } } } }, taskStore },
  );
  s.experimental.tasks.registerToolTask(
    "count_items",
    {
      description: "Counts an order's items as a task; order ord_bad breaks the outputSchema.",
      inputSchema: { order_id: z.string().regex(/^ord_[a-z0-9]+$/) },
      outputSchema: { count: z.number().int() },
      execution: { taskSupport: "required" },
    },
    {
      createTask: async ({ order_id }, extra) => {
        out.server.createdTasks++;
        const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 50 });
        setTimeout(() => {
          const structured = order_id === "ord_bad" ? { count: "many" } : { count: 3 };
          extra.taskStore.storeTaskResult(task.taskId, "completed", {
            content: [{ type: "text", text: JSON.stringify(structured) }],
            structuredContent: structured,
          });
        }, 100);
        return { task };
      },
      getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
    },
  );
  s.registerTool("slow", { description: "Answers n after 300 ms.", inputSchema: { n: z.number() } }, async ({ n }) => {
    await sleep(300);
    return { content: [{ type: "text", text: String(n) }] };
  });
  s.registerTool("echo", { description: "Echoes its text.", inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: "text", text }],
  }));
  return s;
}

const transports = {};
const httpServer = http.createServer(async (req, res) => {
  out.server.requests++;
  if (req.headers.origin) out.server.origins.push(req.headers.origin);
  const sid = req.headers["mcp-session-id"];
  if (req.method === "GET") {
    openGets++;
    maxOpenGets = Math.max(maxOpenGets, openGets);
    res.on("close", () => openGets--);
  }
  let body;
  if (req.method === "POST") {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    body = JSON.parse(Buffer.concat(chunks).toString() || "null");
  }
  let t = sid && transports[sid];
  if (!t && req.method === "POST" && isInitializeRequest(body)) {
    t = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => (transports[id] = t),
    });
    await newServer().connect(t);
  }
  if (!t) {
    res.writeHead(400).end("no session");
    return;
  }
  await t.handleRequest(req, res, body);
});
await new Promise((r) => httpServer.listen(port, "127.0.0.1", r));

// ---- the client side -------------------------------------------------------
async function refused(p) {
  try {
    await p;
    return { code: null };
  } catch (e) {
    return { code: e.code ?? null, message: String(e.message), data: e.data ?? null };
  }
}

// hostFetch sends each request with another Host header, as a browser does
// after DNS rebinding; fetch itself never lets a caller set Host.
function hostFetch(host) {
  return (url, init = {}) =>
    new Promise((resolve, reject) => {
      const headers = Object.fromEntries(new Headers(init.headers));
      headers.host = host;
      const req = http.request(url, { method: init.method ?? "GET", headers, signal: init.signal }, (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve(new Response(Buffer.concat(chunks), { status: res.statusCode, headers: res.headers })));
      });
      req.on("error", reject);
      if (init.body) req.write(init.body);
      req.end();
    });
}

async function connect(opts = {}) {
  const c = new Client({ name: "ts-client", version: "1" });
  await c.connect(new StreamableHTTPClientTransport(gateURL, opts));
  return c;
}

// DNS rebinding: an evil Host alone, then an evil Origin alone.
const before = out.server.requests;
out.evilHost = await refused(connect({ fetch: hostFetch("evil.example.com") }));
out.evilOrigin = await refused(connect({ requestInit: { headers: { Origin: "http://evil.example.com" } } }));
out.probesReachedServer = out.server.requests - before;

// A browser-like client on an allowed origin.
const browser = await connect({
  requestInit: { headers: { Origin: "https://app.example.com", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Site": "cross-site" } },
});
const echoed = await browser.callTool({ name: "echo", arguments: { text: "from the page" } });
out.browser = { text: echoed.content[0].text, isError: echoed.isError === true };
await browser.close();

// Tasks: a valid task-augmented call, one whose result breaks the
// outputSchema, and one toolgate refuses.
const c = await connect();
await c.listTools();
async function taskCall(args) {
  const seen = { statuses: [] };
  for await (const m of c.experimental.tasks.callToolStream({ name: "count_items", arguments: args }, CallToolResultSchema)) {
    if (m.type === "taskCreated") seen.taskId = m.task.taskId;
    if (m.type === "taskStatus") seen.statuses.push(m.task.status);
    if (m.type === "result") seen.result = m.result;
    if (m.type === "error") seen.error = { code: m.error.code ?? null, message: String(m.error.message), data: m.error.data ?? null };
  }
  return seen;
}
out.taskValid = await taskCall({ order_id: "ord_7" });
out.taskBroken = await taskCall({ order_id: "ord_bad" });
const createdBeforeRefusal = out.server.createdTasks;
out.taskRefused = await taskCall({ order_id: "ORDER 7" });
out.refusedReachedServer = out.server.createdTasks - createdBeforeRefusal;

// 32 concurrent calls in one session, beside its standing GET stream.
for (let i = 0; i < 100 && openGets === 0; i++) await sleep(20);
out.getOpenDuringCalls = openGets;
const answers = await Promise.allSettled(Array.from({ length: 32 }, (_, n) => c.callTool({ name: "slow", arguments: { n } })));
out.concurrent = answers.map((a) => (a.status === "fulfilled" ? a.value.content[0].text : "error: " + a.reason));
out.maxOpenGets = maxOpenGets;
await c.close();

console.log(JSON.stringify(out));
process.exit(0);
