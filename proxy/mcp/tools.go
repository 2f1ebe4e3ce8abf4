package mcp

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
	"github.com/toolgate/toolgate/proxy/sse"
)

// Protocol revisions toolgate serves, newest first.
const (
	protocol20251125 = "2025-11-25"
	protocol20250618 = "2025-06-18"
	protocol20250326 = "2025-03-26"
)

var supportedProtocols = []string{protocol20251125, protocol20250618, protocol20250326}

// maxPages bounds the tools/list pages toolgate reads itself.
const maxPages = 100

// stringMember returns a string member of a JSON object, or "".
func stringMember(obj jsonx.Object, key string) string {
	v := obj.Get(key)
	if v == nil {
		return ""
	}
	s, _ := jsonx.Unquote(v)
	return s
}

func listCursor(params []byte) string {
	obj, err := jsonx.ParseObject(params)
	if err != nil {
		return ""
	}
	return stringMember(obj, "cursor")
}

// declaresElicitation reports an initialize that declares the elicitation
// capability: {} (form, before 2025-11-25) or one with form in it. A client
// offering only url mode cannot show toolgate's yes/no form.
func declaresElicitation(params []byte) bool {
	obj, err := jsonx.ParseObject(params)
	if err != nil {
		return false
	}
	caps, err := jsonx.ParseObject(obj.Get("capabilities"))
	if err != nil {
		return false
	}
	el, err := jsonx.ParseObject(caps.Get("elicitation"))
	if err != nil {
		return false
	}
	return len(el) == 0 || el.Has("form")
}

// taskIDParam is the taskId of a tasks/* request, or "".
func taskIDParam(params []byte) string {
	obj, err := jsonx.ParseObject(params)
	if err != nil {
		return ""
	}
	return stringMember(obj, "taskId")
}

// taskHandle reads a CreateTaskResult: a task with its id, and none of a
// tool result's content.
func taskHandle(res jsonx.Object) (string, bool) {
	if res.Has("content") {
		return "", false
	}
	task, err := jsonx.ParseObject(res.Get("task"))
	if err != nil {
		return "", false
	}
	id := stringMember(task, "taskId")
	return id, id != ""
}

// callParams reads a tools/call's name and arguments, and whether it asks
// to run as a task. Absent arguments are an empty object, as the
// specification defines them.
func callParams(params []byte) (name string, args []byte, task bool, problem string) {
	obj, err := jsonx.ParseObject(params)
	if err != nil {
		return "", nil, false, "params must be an object with the tool's name"
	}
	raw := obj.Get("name")
	name, ok := jsonx.Unquote(raw)
	if raw == nil || !ok || name == "" {
		return "", nil, false, "params.name must be the tool's name"
	}
	args = obj.Get("arguments")
	if args == nil || string(compact(args)) == "null" {
		args = []byte("{}")
	}
	_, terr := jsonx.ParseObject(obj.Get("task"))
	return name, args, terr == nil, ""
}

// parseTools reads one tools/list result: its tools, each tool's raw
// bytes, and nextCursor.
func parseTools(result []byte) (tools []catalog.MCPTool, raws [][]byte, next string, err error) {
	obj, err := jsonx.ParseObject(result)
	if err != nil {
		return nil, nil, "", errors.New("the tools/list result is not an object")
	}
	next = stringMember(obj, "nextCursor")
	raws, err = jsonx.ParseArray(obj.Get("tools"))
	if err != nil {
		return nil, nil, "", errors.New("the tools/list result has no tools array")
	}
	for _, raw := range raws {
		t, err := jsonx.ParseObject(raw)
		if err != nil {
			return nil, nil, "", errors.New("a listed tool is not an object")
		}
		mt := catalog.MCPTool{Name: stringMember(t, "name"), Description: stringMember(t, "description"),
			InputSchema: t.Get("inputSchema"), OutputSchema: t.Get("outputSchema"), Raw: raw}
		if ann, err := jsonx.ParseObject(t.Get("annotations")); err == nil {
			mt.Destructive = string(compact(ann.Get("destructiveHint"))) == "true" && string(compact(ann.Get("readOnlyHint"))) != "true"
		}
		if mt.Name == "" {
			return nil, nil, "", errors.New("a listed tool has no name")
		}
		tools = append(tools, mt)
	}
	return tools, raws, next, nil
}

// initialized records what the session negotiated and declared.
// A revision toolgate does not know might carry calls it cannot read, so
// the handshake fails instead.
func (cr *clientRequest) initialized(m *message, t tracked) ([]byte, bool) {
	obj, err := jsonx.ParseObject(m.result)
	if err != nil {
		return nil, false
	}
	v := stringMember(obj, "protocolVersion")
	if !slices.Contains(supportedProtocols, v) {
		return jsonrpc.ErrorResponse(m.id, jsonrpc.CodeInvalidRequest, "toolgate does not serve MCP revision "+strconv.Quote(v)+
			"; it serves "+strings.Join(supportedProtocols, ", "), nil), true
	}
	sid := cr.upstreamSession
	if sid == "" {
		sid = cr.sess.id
	}
	cr.rt.state.get(sid, true).setProtocol(v, t.elicit)
	return nil, false
}

// listed learns a tools/list page and takes out of it the tools whose
// definitions drifted from their pins under block or hold, and under
// expose: catalog the hidden ones.
func (cr *clientRequest) listed(m *message, t tracked) ([]byte, bool) {
	tools, raws, next, err := parseTools(m.result)
	if err != nil {
		return nil, false
	}
	if cr.statelessRevision {
		cr.learnStateless(t, m.result, tools, next)
	} else {
		cr.sess.learnPage(t.cursor, tools, next)
	}
	refused := cr.judgePins(tools)
	exposeAll := cr.rt.snap.Config.Catalog.MCP.Expose != catalog.ExposeCatalog
	if exposeAll && len(refused) == 0 {
		return nil, false
	}
	kept := make([][]byte, 0, len(raws))
	for i, tool := range tools {
		if !refused[tool.Name] && (exposeAll || cr.rt.snap.MCPTools[cr.rt.cfg.Name+"/"+tool.Name] != nil) {
			kept = append(kept, raws[i])
		}
	}
	if len(kept) == len(raws) {
		return nil, false
	}
	res, _ := jsonx.ParseObject(m.result)
	res = res.Set("tools", joinBatch(kept))
	return replaceMember(m.raw, "result", res.Bytes()), true
}

// replaceMember returns msg with one member's value replaced.
func replaceMember(msg []byte, key string, value []byte) []byte {
	obj, err := jsonx.ParseObject(msg)
	if err != nil {
		return msg
	}
	return obj.Set(key, value).Bytes()
}

// fetchTools reads the server's whole tool list in this session with
// toolgate's own requests, for a call toolgate must judge before the
// client listed the tools (or after they changed).
func (cr *clientRequest) fetchTools() error {
	tools, _, err := cr.readList()
	if err != nil {
		return err
	}
	cr.sess.setTools(tools)
	return nil
}

// readList reads the server's whole tool list with toolgate's own
// requests, and the stricter of its pages' caching terms.
func (cr *clientRequest) readList() ([]catalog.MCPTool, listCache, error) {
	var all []catalog.MCPTool
	var terms listCache
	cursor := ""
	for page := range maxPages {
		id := "toolgate-" + randomHex()
		res, err := cr.ask(request(id, "tools/list", cr.listParams(cursor)), id)
		if err != nil {
			return nil, listCache{}, err
		}
		tools, _, next, err := parseTools(res)
		if err != nil {
			return nil, listCache{}, &listError{server: cr.rt.cfg.Name, reason: "answered toolgate's tools/list with a result it could not read: " + err.Error()}
		}
		obj, _ := jsonx.ParseObject(res)
		if c := readCache(obj); page == 0 {
			terms = c
		} else {
			terms = terms.merge(c)
		}
		all = append(all, tools...)
		if next == "" {
			cr.judgePins(all)
			return all, terms, nil
		}
		cursor = next
	}
	return nil, listCache{}, &listError{server: cr.rt.cfg.Name, reason: fmt.Sprintf("lists more than %d pages of tools", maxPages)}
}

// listParams are the params of toolgate's own tools/list. A stateless
// revision wants every request to say which revision it speaks; toolgate
// declares no capabilities of its own.
func (cr *clientRequest) listParams(cursor string) any {
	p := map[string]any{}
	if cursor != "" {
		p["cursor"] = cursor
	}
	if cr.statelessRevision {
		p["_meta"] = map[string]any{metaProtocol: cr.version, metaCapabilities: map[string]any{}}
	}
	if len(p) == 0 {
		return nil
	}
	return p
}

// ownHeader makes the client's headers those of toolgate's own tools/list:
// its routing headers say what this request is, not what the client's was.
func ownHeader(h http.Header) {
	h.Set(hdrMethod, "tools/list")
	h.Del(hdrName)
	for k := range h {
		if strings.HasPrefix(k, "Mcp-Param-") {
			delete(h, k)
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
}

// listError is a server that would not give toolgate its tool list: who
// and what it said.
type listError struct {
	server string
	reason string
}

func (e *listError) Error() string {
	return "the MCP server " + strconv.Quote(e.server) + " " + e.reason
}

// maxServerWords bounds what a refusal quotes of the server's words.
const maxServerWords = 300

// serverWords is the server's own words from an error answer: a JSON-RPC
// error's message and code, else the body's first line, bounded.
func serverWords(body []byte) string {
	msgs, _, _, perr := parseBody(body)
	if perr == nil && len(msgs) == 1 && msgs[0].err != nil {
		return rpcErrorText(msgs[0].err)
	}
	t := strings.TrimSpace(string(body))
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		t = t[:i]
	}
	return quoteBounded(t)
}

// rpcErrorText is a JSON-RPC error object as "message (code N)".
func rpcErrorText(e []byte) string {
	obj, err := jsonx.ParseObject(e)
	if err != nil {
		return "an error"
	}
	return quoteBounded(stringMember(obj, "message")) + " (code " + string(compact(obj.Get("code"))) + ")"
}

func quoteBounded(s string) string {
	if len(s) > maxServerWords {
		s = strings.ToValidUTF8(s[:maxServerWords], "") + "…"
	}
	return strconv.Quote(s)
}

// ask sends one request of toolgate's own and returns its result.
func (cr *clientRequest) ask(body []byte, id string) ([]byte, error) {
	resp, cancel, err := cr.send(http.MethodPost, body, true, ownHeader)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && cr.r.Header.Get(hdrSession) != "" && !cr.statelessRevision {
		cr.sessionStatus(resp)
		body, _ := readLimited(resp.Body, 64<<10)
		return nil, &sessionGone{header: resp.Header.Clone(), body: body}
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, &listError{server: cr.rt.cfg.Name, reason: "answered toolgate's tools/list with HTTP " + strconv.Itoa(resp.StatusCode) + ": " + serverWords(b)}
	}
	want, _ := json.Marshal(id)
	limit := cr.rt.snap.Config.Limits.MaxResponseBytes
	find := func(data []byte) ([]byte, bool, error) {
		msgs, _, _, perr := parseBody(data)
		if perr != nil {
			return nil, false, nil
		}
		for _, m := range msgs {
			if m.kind == kindResponse && bytes.Equal(m.id, want) {
				if m.err != nil {
					return nil, true, &listError{server: cr.rt.cfg.Name, reason: "refused toolgate's tools/list: " + rpcErrorText(m.err)}
				}
				return m.result, true, nil
			}
		}
		return nil, false, nil
	}
	switch mediaType(resp.Header) {
	case "application/json":
		b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil || int64(len(b)) > limit {
			return nil, errors.New("the server's tools/list answer could not be read")
		}
		if res, ok, err := find(b); ok {
			return res, err
		}
	case "text/event-stream":
		rd := sse.NewReader(resp.Body, int(min(limit, 1<<31-1)))
		for rd.Next() {
			if res, ok, err := find(rd.Event().Data); ok {
				return res, err
			}
		}
	}
	return nil, errors.New("the server did not answer toolgate's tools/list")
}

// sessionGone is the server's 404 for the client's session, met by a
// request of toolgate's own; the client gets it as the server sent it, so
// its SDK starts a new session.
type sessionGone struct {
	header http.Header
	body   []byte
}

func (e *sessionGone) Error() string { return "the MCP server no longer knows this session" }

func randomHex() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
