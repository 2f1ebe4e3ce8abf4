package mcp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/internal/jsonx"
	"github.com/toolgate/toolgate/proxy/jsonrpc"
)

// Tool definitions pinned against a server that changes them after they
// were reviewed (docs/pins.md). Every list toolgate sees, the client's or its
// own, is judged tool by tool against the pin file and the pins in
// approvals.store; a drifted tool is remembered per server, so a call to
// it is refused without another look at the store unless a person may
// have accepted it since.

// DriftCode is data.code of a call refused for its tool's drift.
const DriftCode = "tool_definition_changed"

// Drift actions (toolgate_tool_definition_drift_total{action}).
const (
	DriftBlocked  = "blocked"
	DriftHeld     = "held"
	DriftWarned   = "warned"
	DriftAccepted = "accepted"
)

// DriftReport is a tool definition unlike its pin, as the pipeline counts,
// logs and records it: both digests and what changed, never the
// arguments of any call.
type DriftReport struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Action string `json:"action"`
	// PinnedDigest is "" for a tool that has no pin.
	PinnedDigest string          `json:"pinned_digest,omitempty"`
	Digest       string          `json:"digest"`
	Diff         json.RawMessage `json:"diff"`
	By           string          `json:"by,omitempty"`
}

// definitionMembers are what a tool's digest covers, in canonical order.
var definitionMembers = []string{"annotations", "description", "inputSchema", "name", "outputSchema"}

// Definition is a listed tool's definition as canonical JSON and its
// digest, "sha256:" and hex. A tool whose JSON names a member twice has
// no definition anyone could review, so it has none.
func Definition(raw []byte) ([]byte, string, error) {
	if _, err := approval.Canonical(raw); err != nil {
		return nil, "", err
	}
	obj, err := jsonx.ParseObject(raw)
	if err != nil {
		return nil, "", err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for _, k := range definitionMembers {
		v := obj.Get(k)
		if v == nil {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	def, err := approval.Canonical(b.Bytes())
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(def)
	return def, "sha256:" + hex.EncodeToString(sum[:]), nil
}

// maxSeen bounds the drifted definitions remembered per server as
// already reported.
const maxSeen = 4096

// pinState is what a server's drift looks like to this process: the
// tools refused and the definitions already reported.
type pinState struct {
	pinsMu sync.Mutex
	drift  map[string]string // tool → the drifted digest refused
	seen   map[string]bool   // action, tool and digest already reported
}

func (p *pinState) setDrift(tool, digest string) {
	p.pinsMu.Lock()
	defer p.pinsMu.Unlock()
	if p.drift == nil {
		p.drift = map[string]string{}
	}
	if _, have := p.drift[tool]; !have && len(p.drift) >= maxSeen {
		return
	}
	p.drift[tool] = digest
}

func (p *pinState) clearDrift(tool string) {
	p.pinsMu.Lock()
	delete(p.drift, tool)
	p.pinsMu.Unlock()
}

func (p *pinState) drifted(tool string) (string, bool) {
	p.pinsMu.Lock()
	defer p.pinsMu.Unlock()
	d, ok := p.drift[tool]
	return d, ok
}

// firstSight reports a drift not reported before by this process.
func (p *pinState) firstSight(action, tool, digest string) bool {
	p.pinsMu.Lock()
	defer p.pinsMu.Unlock()
	k := action + "\x00" + tool + "\x00" + digest
	if p.seen[k] || len(p.seen) >= maxSeen {
		return false
	}
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	p.seen[k] = true
	return true
}

// pinStore is approvals.store's pins, nil without approvals.
func (cr *clientRequest) pinStore() *approval.PinStore {
	if cr.rt.gateway.deps.Approvals == nil {
		return nil
	}
	return cr.rt.gateway.deps.Approvals.Pins()
}

// pinned is the pin a definition is judged against.
type pinned struct {
	digest     string
	definition []byte
}

// judgePins judges the tools of one list against their pins, records and
// reports what drifted, and returns the tools to take out of the list.
func (cr *clientRequest) judgePins(tools []catalog.MCPTool) map[string]bool {
	p := cr.rt.snap.Config.Catalog.Pins
	if !p.Enabled() || len(tools) == 0 {
		return nil
	}
	server := cr.rt.cfg.Name
	var file map[string]catalog.PinEntry
	if cr.rt.snap.Pins != nil {
		file = cr.rt.snap.Pins.Servers[server]
	}
	ps := cr.pinStore()
	var stored map[string]approval.Pin
	var storeErr error
	if ps != nil {
		stored, storeErr = ps.Pins(cr.ctx, server)
	}
	if storeErr != nil {
		cr.log().Warn("mcp pins unavailable; tools without a matching file pin count as drifted", zap.Error(storeErr))
	}
	var out map[string]bool
	for _, t := range tools {
		def, digest, err := Definition(t.Raw)
		fe, inFile := file[t.Name]
		sp, inStore := stored[t.Name]
		if err == nil && ((inFile && fe.Digest == digest) || (inStore && sp.Digest == digest)) {
			cr.rt.state.clearDrift(t.Name)
			continue
		}
		if err == nil && !inFile && !inStore && p.FirstUse && ps != nil && storeErr == nil {
			pin, perr := ps.PinFirst(cr.ctx, server, t.Name, approval.Pin{Digest: digest, Definition: def, At: time.Now().UTC()})
			if perr == nil && pin.Digest == digest {
				cr.rt.state.clearDrift(t.Name)
				continue
			}
			sp, inStore = pin, perr == nil
		}
		was := pinned{}
		switch {
		case inStore:
			was = pinned{digest: sp.Digest, definition: sp.Definition}
		case inFile:
			was = pinned{digest: fe.Digest, definition: fe.Definition}
		}
		if cr.drifted(t.Name, was, def, digest) {
			if out == nil {
				out = map[string]bool{}
			}
			out[t.Name] = true
		}
	}
	return out
}

// drifted handles one drifted definition by on_drift, and reports whether
// it is refused.
func (cr *clientRequest) drifted(tool string, was pinned, def []byte, digest string) bool {
	p := cr.rt.snap.Config.Catalog.Pins
	action := map[string]string{catalog.DriftBlock: DriftBlocked, catalog.DriftHold: DriftHeld, catalog.DriftWarn: DriftWarned}[p.OnDrift]
	if digest == "" {
		// A definition no digest stands for is refused, never held: a
		// person could not review what it says.
		digest, action = "unreadable", DriftBlocked
		if p.OnDrift == catalog.DriftWarn {
			action = DriftWarned
		}
	}
	diff := DefinitionDiff(was.definition, def)
	if action == DriftHeld {
		if ps := cr.pinStore(); ps != nil {
			_, err := ps.Drifted(cr.ctx, approval.Drift{Server: cr.rt.cfg.Name, Tool: tool, PinnedDigest: was.digest, Pinned: was.definition,
				Digest: digest, Definition: def, Diff: diff, Since: time.Now().UTC()})
			if err != nil {
				cr.log().Warn("mcp drifted tool definition not recorded for a person", zap.String("tool", tool), zap.Error(err))
			}
		}
	}
	if cr.rt.state.firstSight(action, tool, digest) {
		cr.rt.pipe.Drift(cr.ctx, &DriftReport{Server: cr.rt.cfg.Name, Tool: tool, Action: action, PinnedDigest: was.digest, Digest: digest, Diff: diff})
	}
	if action == DriftWarned {
		cr.rt.state.clearDrift(tool)
		return false
	}
	cr.rt.state.setDrift(tool, digest)
	return true
}

// pinRefusal answers a call to a tool whose definition drifted, unless a
// pin in force now matches it: a person may have accepted it, on any
// replica, or a reload brought a new pin file.
func (cr *clientRequest) pinRefusal(m *message, name string) []byte {
	p := cr.rt.snap.Config.Catalog.Pins
	if !p.Enabled() || !p.Refuses() {
		return nil
	}
	digest, ok := cr.rt.state.drifted(name)
	if !ok {
		return nil
	}
	if cr.rt.snap.Pins != nil && cr.rt.snap.Pins.Servers[cr.rt.cfg.Name][name].Digest == digest {
		cr.rt.state.clearDrift(name)
		return nil
	}
	if ps := cr.pinStore(); ps != nil {
		if stored, err := ps.Pins(cr.ctx, cr.rt.cfg.Name); err == nil && stored[name].Digest == digest {
			cr.rt.state.clearDrift(name)
			return nil
		}
	}
	cr.outcome = outcomeEscalated
	msg := "Invalid params: the definition of tool " + strconv.Quote(name) + " changed since it was pinned; toolgate did not forward this call"
	if p.OnDrift == catalog.DriftHold {
		msg += " (the new definition awaits a person's review)"
	}
	return jsonrpc.ErrorResponse(m.id, jsonrpc.CodeInvalidParams, msg, struct {
		Code   string `json:"code"`
		Tool   string `json:"tool"`
		Digest string `json:"digest"`
	}{DriftCode, name, digest})
}

// maxDiff bounds the members a diff lists.
const maxDiff = 200

type diffEntry struct {
	Path string          `json:"path"`
	Was  json.RawMessage `json:"was,omitempty"`
	Now  json.RawMessage `json:"now,omitempty"`
}

// DefinitionDiff lists each member of two definitions that differs, by
// JSON pointer: objects member by member, anything else whole. was is nil
// for a tool with no pin.
func DefinitionDiff(was, now []byte) json.RawMessage {
	var out []diffEntry
	diffValue("", was, now, &out)
	if out == nil {
		out = []diffEntry{}
	}
	b, _ := json.Marshal(out)
	return b
}

func diffValue(path string, a, b []byte, out *[]diffEntry) {
	if len(*out) >= maxDiff {
		return
	}
	ca, _ := approval.Canonical(a)
	cb, _ := approval.Canonical(b)
	if a != nil && b != nil && bytes.Equal(ca, cb) {
		return
	}
	var oa, ob map[string]json.RawMessage
	if errA, errB := json.Unmarshal(a, &oa), json.Unmarshal(b, &ob); errA == nil && errB == nil && oa != nil && ob != nil {
		keys := make([]string, 0, len(oa)+len(ob))
		for k := range oa {
			keys = append(keys, k)
		}
		for k := range ob {
			if _, have := oa[k]; !have {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			diffValue(path+"/"+pointerEscape(k), oa[k], ob[k], out)
		}
		return
	}
	*out = append(*out, diffEntry{Path: path, Was: rawOrNil(ca), Now: rawOrNil(cb)})
}

func rawOrNil(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
