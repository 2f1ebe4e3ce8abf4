// Package pipeline is what decides, with no HTTP in it: the verdict on an
// answer (Decide) and what carrying it out produced (Effects), the books
// every route keeps (Recorder: counts, escalation records, the request
// log line), the reply value the exchange's writer sends, toolgate's own
// failures and their classes, and the judging of tool results. A model
// route (proxy/exchange) and an MCP route (proxy/mcpcall.go) decide the
// same call the same way through it.
package pipeline
