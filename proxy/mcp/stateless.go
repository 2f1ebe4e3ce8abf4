package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
)

// maxLists bounds the tool lists kept per server: one public list and the
// private ones of distinct callers.
const maxLists = 1024

// maxListTTL bounds how long a list is trusted whatever ttlMs says, so a
// server that promised too much is read again within a day.
const maxListTTL = 24 * time.Hour

// toolList is a server's complete tool list as toolgate read it for
// stateless requests, and until when it may judge calls.
type toolList struct {
	tools   []catalog.MCPTool
	expires time.Time

	mu     sync.Mutex
	set    *catalog.MCPSet
	setFor *catalog.Snapshot
}

// judgedSet is the judged tool set of the list under snap, built once per
// snapshot.
func (l *toolList) judgedSet(snap *catalog.Snapshot, server string) *catalog.MCPSet {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.set == nil || l.setFor != snap {
		l.set, l.setFor = snap.MCPSet(server, l.tools), snap
	}
	return l.set
}

// listCache is what a tools/list result says about keeping it: ttlMs and
// cacheScope. Absent, a list is stale at once and public.
type listCache struct {
	ttl     time.Duration
	private bool
}

// readCache reads ttlMs and cacheScope of a list result.
func readCache(res jsonx.Object) listCache {
	var c listCache
	if f, err := strconv.ParseFloat(string(compact(res.Get("ttlMs"))), 64); err == nil && f > 0 && !math.IsInf(f, 0) {
		c.ttl = time.Duration(min(f, float64(maxListTTL/time.Millisecond))) * time.Millisecond
	}
	c.private = stringMember(res, "cacheScope") == "private"
	return c
}

// merge keeps the stricter of two pages' terms.
func (c listCache) merge(o listCache) listCache {
	return listCache{ttl: min(c.ttl, o.ttl), private: c.private || o.private}
}

// listKey is where a list is kept: the public one, or a caller's own when
// the server scoped it private. A private list of a caller toolgate cannot
// tell apart is not kept.
func listKey(c listCache, caller string) (string, bool) {
	if !c.private {
		return "", true
	}
	if caller == "" {
		return "", false
	}
	return "p:" + caller, true
}

// freshList returns the list that judges a caller's stateless call now:
// its private one, else the public one, if still fresh.
func (st *serverState) freshList(caller string, now time.Time) *toolList {
	st.listsMu.Lock()
	defer st.listsMu.Unlock()
	if caller != "" {
		if l := st.lists["p:"+caller]; l != nil && now.Before(l.expires) {
			return l
		}
	}
	if l := st.lists[""]; l != nil && now.Before(l.expires) {
		return l
	}
	return nil
}

// keepList stores a complete list read now for as long as its terms allow,
// and returns it for the call at hand whatever they say.
func (st *serverState) keepList(caller string, tools []catalog.MCPTool, c listCache, now time.Time) *toolList {
	l := &toolList{tools: tools, expires: now.Add(c.ttl)}
	key, ok := listKey(c, caller)
	if !ok || c.ttl <= 0 {
		return l
	}
	st.listsMu.Lock()
	defer st.listsMu.Unlock()
	if st.lists == nil {
		st.lists = map[string]*toolList{}
	}
	if _, have := st.lists[key]; !have && len(st.lists) >= maxLists {
		for k, old := range st.lists {
			if !now.Before(old.expires) {
				delete(st.lists, k)
			}
		}
		for k := range st.lists {
			if len(st.lists) < maxLists {
				break
			}
			delete(st.lists, k)
		}
	}
	st.lists[key] = l
	return l
}

// dropLists forgets every list: the server said its tools changed.
func (st *serverState) dropLists() {
	st.listsMu.Lock()
	st.lists = nil
	st.listsMu.Unlock()
}

// caller names who a private list belongs to: a digest of the client's
// credentials, never the credentials themselves.
func (cr *clientRequest) caller() string {
	a := cr.r.Header.Get("Authorization")
	if a == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(a))
	return hex.EncodeToString(sum[:16])
}

// listsTool reports a tool the set lists, callable or hidden.
func listsTool(set *catalog.MCPSet, name string) bool {
	_, listed := set.Labels[name]
	return listed || set.Hidden[name]
}

// statelessSet is the judged tool set for a stateless call to name: the
// kept list when it is fresh and knows the tool, else the server's list
// read now.
func (cr *clientRequest) statelessSet(name string) (*catalog.MCPSet, error) {
	now := time.Now()
	if l := cr.rt.state.freshList(cr.caller(), now); l != nil {
		if set := l.judgedSet(cr.rt.snap, cr.rt.cfg.Name); listsTool(set, name) {
			return set, nil
		}
	}
	tools, c, err := cr.readList()
	if err != nil {
		return nil, err
	}
	return cr.rt.state.keepList(cr.caller(), tools, c, now).judgedSet(cr.rt.snap, cr.rt.cfg.Name), nil
}

// learnStateless keeps a complete list a stateless client read itself.
func (cr *clientRequest) learnStateless(t tracked, result []byte, tools []catalog.MCPTool, next string) {
	if t.cursor != "" || next != "" {
		return // one page of several; toolgate reads the whole list when it needs it
	}
	res, err := jsonx.ParseObject(result)
	if err != nil {
		return
	}
	cr.rt.state.keepList(cr.caller(), tools, readCache(res), time.Now())
}

// discovered narrows a server/discover answer's supportedVersions to the
// revisions toolgate serves too, so a client never settles on one it
// would then refuse.
func discovered(m *message) ([]byte, bool) {
	res, err := jsonx.ParseObject(m.result)
	if err != nil {
		return nil, false
	}
	raws, err := jsonx.ParseArray(res.Get("supportedVersions"))
	if err != nil {
		return nil, false
	}
	kept := make([][]byte, 0, len(raws))
	for _, r := range raws {
		if v, ok := jsonx.Unquote(r); ok && slices.Contains(servedProtocols, v) {
			kept = append(kept, r)
		}
	}
	if len(kept) == len(raws) {
		return nil, false
	}
	res = res.Set("supportedVersions", joinBatch(kept))
	return replaceMember(m.raw, "result", res.Bytes()), true
}
