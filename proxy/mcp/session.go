package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/toolgate/toolgate/catalog"
)

// maxSessions bounds the sessions toolgate remembers per server. A session
// it forgot still works: its tool list is fetched again before the next
// call is judged, and elicitation counts as undeclared.
const maxSessions = 4096

// maxTracked bounds the requests of one session whose answers toolgate
// still waits to read.
const maxTracked = 1024

// serverState is what toolgate knows about one MCP server across reloads.
type serverState struct {
	mu       sync.Mutex
	sessions map[string]*session
	// lists are the tool lists stateless requests are judged by (listsMu).
	listsMu sync.Mutex
	lists   map[string]*toolList
	// pinState is the server's drifted tool definitions (pins.go).
	pinState
}

func newServerState() *serverState { return &serverState{sessions: map[string]*session{}} }

// get returns the session with id, creating it when create is set. The
// empty id is the one shared state of a server that runs without sessions.
func (st *serverState) get(id string, create bool) *session {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.sessions[id]
	if s == nil && create {
		if len(st.sessions) >= maxSessions {
			st.evictOldest()
		}
		s = &session{id: id, tracked: map[string]tracked{}, tasks: map[string]tracked{}, pending: map[string]chan json.RawMessage{}, held: map[string]chan struct{}{}}
		st.sessions[id] = s
	}
	if s != nil {
		s.mu.Lock()
		s.lastUsed = time.Now()
		s.mu.Unlock()
	}
	return s
}

func (st *serverState) drop(id string) {
	st.mu.Lock()
	delete(st.sessions, id)
	st.mu.Unlock()
}

func (st *serverState) evictOldest() {
	var oldest *session
	for _, s := range st.sessions {
		s.mu.Lock()
		if oldest == nil || s.lastUsed.Before(oldest.lastUsed) {
			oldest = s
		}
		s.mu.Unlock()
	}
	if oldest != nil {
		delete(st.sessions, oldest.id)
	}
}

// trackKind is what a forwarded request's answer needs from toolgate.
type trackKind uint8

const (
	trackInit trackKind = iota + 1
	trackList
	trackCall
	trackDiscover
)

// tracked is a forwarded request whose answer toolgate reads.
type tracked struct {
	kind trackKind
	// cursor of a tools/list page ("" for the first page).
	cursor string
	// tool of a tools/call.
	tool string
	// elicit is what an initialize declared.
	elicit bool
	// output, version and label of a tools/call: the outputSchema its
	// result must meet and how to count it.
	output  *catalog.MCPSchema
	version string
	label   string
	// confirmed is the digest of a stateless call a person confirmed: an
	// input_required answer to it keeps it confirmed.
	confirmed string
}

// session is toolgate's view of one MCP session.
type session struct {
	id string

	mu       sync.Mutex
	lastUsed time.Time
	protocol string
	elicit   bool
	// tools is the last complete tool list; fresh is false until one was
	// read and again after notifications/tools/list_changed.
	tools []catalog.MCPTool
	fresh bool
	// paging collects a client's own tools/list pages from the first one.
	paging     []catalog.MCPTool
	pagingFrom bool
	set        *catalog.MCPSet
	setFor     *catalog.Snapshot
	setOf      []catalog.MCPTool
	// open counts calls in flight; freed is closed when one ends.
	open    int
	freed   chan struct{}
	tracked map[string]tracked
	// tasks are the judged calls the server runs as tasks, by task id, so
	// a tasks/result answer is checked like the call's own result.
	tasks map[string]tracked
	// pending are toolgate's own elicitation requests by id.
	pending map[string]chan json.RawMessage
	// held are calls waiting for a person, by the client's request id; a
	// notifications/cancelled for one closes its channel.
	held map[string]chan struct{}
}

// label is how sinks and logs name the session: a hash, since a session
// id can be all a server asks to resume a session.
func (s *session) label() string {
	if s.id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s.id))
	return "s_" + hex.EncodeToString(sum[:8])
}

// acquire takes a slot for a call in flight, waiting up to wait for one
// while the session has limit calls in flight: a client's SDK sends calls
// concurrently and does not retry a refusal, so a burst queues instead.
// Requests without a session (an initialize, or every request to a server
// that keeps no sessions) come from many clients at once and are not
// capped. It is false when no slot freed in time or ctx ended.
func (s *session) acquire(ctx context.Context, limit int, wait time.Duration) bool {
	var timeout <-chan time.Time
	for {
		s.mu.Lock()
		if s.id == "" || s.open < limit {
			s.open++
			s.mu.Unlock()
			return true
		}
		if s.freed == nil {
			s.freed = make(chan struct{})
		}
		freed := s.freed
		s.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		case <-timeout:
			return false
		}
	}
}

// release frees a slot and wakes the calls waiting for one.
func (s *session) release() {
	s.mu.Lock()
	s.open--
	if s.freed != nil {
		close(s.freed)
		s.freed = nil
	}
	s.mu.Unlock()
}

func (s *session) track(id string, t tracked) {
	s.mu.Lock()
	defer s.mu.Unlock()
	putBounded(s.tracked, id, t)
}

// putBounded sets m[k], first dropping an entry when m is full: a client
// that never reads its answers must not grow it without bound.
func putBounded(m map[string]tracked, k string, t tracked) {
	if len(m) >= maxTracked {
		for old := range m {
			delete(m, old)
			break
		}
	}
	m[k] = t
}

// trackTask remembers the call a task handle answered.
func (s *session) trackTask(taskID string, t tracked) {
	s.mu.Lock()
	defer s.mu.Unlock()
	putBounded(s.tasks, taskID, t)
}

// task returns the call a task runs; a task's result may be fetched more
// than once, so it is not forgotten here.
func (s *session) task(taskID string) (tracked, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	return t, ok
}

// answered returns and forgets what was tracked for a response id.
func (s *session) answered(id string) (tracked, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tracked[id]
	delete(s.tracked, id)
	return t, ok
}

// learnPage adds one tools/list page. A page asked for without a cursor
// starts a new list; the page without nextCursor completes it.
func (s *session) learnPage(cursor string, tools []catalog.MCPTool, next string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cursor == "" {
		s.paging, s.pagingFrom = nil, true
	}
	if !s.pagingFrom {
		return // a page of a list whose start toolgate did not see
	}
	s.paging = append(s.paging, tools...)
	if next == "" {
		s.tools, s.fresh = s.paging, true
		s.paging, s.pagingFrom = nil, false
	}
}

// stale marks the tool list out of date (notifications/tools/list_changed).
func (s *session) stale() {
	s.mu.Lock()
	s.fresh = false
	s.paging, s.pagingFrom = nil, false
	s.mu.Unlock()
}

// catalogFor returns the judged tool set under snap, or nil when the list
// is not known fresh. It is rebuilt when the list or the snapshot changed.
func (s *session) catalogFor(snap *catalog.Snapshot, server string) *catalog.MCPSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.fresh {
		return nil
	}
	if s.set == nil || s.setFor != snap || !sameList(s.setOf, s.tools) {
		s.set, s.setFor, s.setOf = snap.MCPSet(server, s.tools), snap, s.tools
	}
	return s.set
}

func sameList(a, b []catalog.MCPTool) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// setTools installs a complete list toolgate fetched itself.
func (s *session) setTools(tools []catalog.MCPTool) {
	s.mu.Lock()
	s.tools, s.fresh = tools, true
	s.mu.Unlock()
}

func (s *session) setProtocol(v string, elicit bool) {
	s.mu.Lock()
	s.protocol, s.elicit = v, elicit
	s.mu.Unlock()
}

func (s *session) negotiated() (protocol string, elicit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.protocol, s.elicit
}

// hold registers toolgate's elicitation id and the held call's id.
func (s *session) hold(elicitID string, answer chan json.RawMessage, callID string, cancelled chan struct{}) {
	s.mu.Lock()
	s.pending[elicitID] = answer
	s.held[callID] = cancelled
	s.mu.Unlock()
}

func (s *session) unhold(elicitID, callID string) {
	s.mu.Lock()
	delete(s.pending, elicitID)
	delete(s.held, callID)
	s.mu.Unlock()
}

// deliver hands the client's answer to one of toolgate's own elicitation
// requests to the call waiting on it. An error answer counts as a no.
func (s *session) deliver(m *message) bool {
	var id string
	if json.Unmarshal(m.id, &id) != nil {
		return false
	}
	s.mu.Lock()
	ch, ok := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if !ok {
		return false
	}
	ans := m.result
	if ans == nil {
		ans = json.RawMessage(`{}`)
	}
	ch <- ans
	return true
}

// cancelHeld reports a notifications/cancelled for a call toolgate holds
// for confirmation; the server never saw that call, so the notification
// stops here.
func (s *session) cancelHeld(params []byte) bool {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
		return false
	}
	key := string(compact(p.RequestID))
	s.mu.Lock()
	ch, ok := s.held[key]
	delete(s.held, key)
	s.mu.Unlock()
	if ok {
		close(ch)
	}
	return ok
}
