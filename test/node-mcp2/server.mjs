// A stateless MCP server of the TypeScript SDK v2, served over HTTP by its
// Node adapter on a loopback port the kernel picks. It prints
// "listening <url>" first, then one JSON line per tool call it runs, so
// that the test knows which calls reached it.
import { createServer } from "node:http";
import { localhostHostValidation, localhostOriginValidation, toNodeHandler } from "@modelcontextprotocol/node";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";

function ran(tool, args) {
  process.stdout.write(JSON.stringify({ ran: tool, args }) + "\n");
}

function newServer() {
  const s = new McpServer({ name: "ts-v2-orders", version: "2.4.0" });
  s.registerTool(
    "lookup_order",
    {
      description: "Looks an order up by its id.",
      inputSchema: z.object({ order_id: z.string().regex(/^ord_[0-9]+$/) }),
    },
    async ({ order_id }) => {
      ran("lookup_order", { order_id });
      return { content: [{ type: "text", text: `${order_id}: shipped` }] };
    },
  );
  s.registerTool(
    "issue_refund",
    {
      description: "Refunds part of an order.",
      inputSchema: z.object({ order_id: z.string(), amount_cents: z.number().int().min(1) }),
    },
    async ({ order_id, amount_cents }) => {
      ran("issue_refund", { order_id, amount_cents });
      return { content: [{ type: "text", text: `refunded ${amount_cents} on ${order_id}` }] };
    },
  );
  s.registerTool(
    "cancel_order",
    {
      description: "Cancels an order.",
      inputSchema: z.object({ order_id: z.string() }),
    },
    async ({ order_id }) => {
      ran("cancel_order", { order_id });
      return { content: [{ type: "text", text: `${order_id}: cancelled` }] };
    },
  );
  return s;
}

const validateHost = localhostHostValidation();
const validateOrigin = localhostOriginValidation();

// Stateless: a server for every request, 2026-07-28 requests served as
// that revision and 2025-era ones by the stateless fallback, with no
// session id either way.
const handle = toNodeHandler(createMcpHandler(newServer));
const http = createServer(async (req, res) => {
  if (!validateHost(req, res) || !validateOrigin(req, res)) return;
  await handle(req, res);
});
http.listen(0, "127.0.0.1", () => {
  const { port } = http.address();
  process.stdout.write(`listening http://127.0.0.1:${port}/mcp\n`);
});
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => http.close(() => process.exit(0)));
}
