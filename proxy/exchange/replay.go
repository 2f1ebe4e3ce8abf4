package exchange

import (
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/proxy/upstream"
)

// Escalation Replays: an SDK or framework that retries a 422 on its own
// (LangChain.js retries every status outside a fixed list that lacks 422)
// would make one escalation cost the model again on every retry, and
// record and count it again. The same request from the same caller on the
// same route, within escalation.replay_window, gets the escalation reply
// it got before: the same id and body, from memory, with no upstream call,
// no sink record and no count. Only escalations answered as a whole 422
// are kept: a stream's in-stream error comes after text, which clients do
// not retry, and a failure the client should retry (a retryable upstream
// status, a 503 of the approval store) is never a replay.

// Bounds of the replay memory, whatever the window: the oldest reply goes
// first.
const (
	maxReplayEntries  = 4096
	maxReplayBytes    = 16 << 20
	maxReplayBodySize = 256 << 10
)

// statusReplayed is a replay's status: the request conflicts with the
// escalation it already got. The first answer is error mode's 422 (docs/escalations.md), which
// LangChain.js retries whatever x-should-retry says; it retries no 409,
// and neither do the SDKs that read x-should-retry.
const statusReplayed = http.StatusConflict

// replayKey names a request for Replays: a digest of its API, route,
// upstream, catalog version, caller and canonical body.
type replayKey [sha256.Size]byte

// replayed is an escalation reply kept for the same request's retries.
type replayed struct {
	key        replayKey
	expires    time.Time
	label      string
	escalation string
	approval   string
	body       []byte
}

// Replays is the per-process memory of recent escalation replies; the
// zero value is empty, and it outlives config generations.
type Replays struct {
	// n is the number of kept replies, read without the lock so that a
	// request pays for its key only while something could match it.
	n     atomic.Int64
	mu    sync.Mutex
	byKey map[replayKey]*replayed
	// order is oldest first; every entry expires after the one before it
	// or with it, but for a window shortened by a reload.
	order []*replayed
	bytes int
}

// find returns the reply kept for k, if it has not expired.
func (rs *Replays) find(k replayKey, now time.Time) *replayed {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	e := rs.byKey[k]
	if e == nil || !now.Before(e.expires) {
		return nil
	}
	return e
}

// keep remembers e, dropping expired replies and the oldest over the
// bounds. A reply already kept for the key stays: it is the one the
// client saw first.
func (rs *Replays) keep(e *replayed) {
	if len(e.body) > maxReplayBodySize {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.byKey == nil {
		rs.byKey = map[replayKey]*replayed{}
	}
	now := time.Now()
	for len(rs.order) > 0 {
		old := rs.order[0]
		if now.Before(old.expires) && len(rs.order) < maxReplayEntries && rs.bytes+len(e.body) <= maxReplayBytes {
			break
		}
		rs.drop(old)
	}
	if _, ok := rs.byKey[e.key]; ok {
		return
	}
	rs.byKey[e.key] = e
	rs.order = append(rs.order, e)
	rs.bytes += len(e.body)
	rs.n.Store(int64(len(rs.order)))
}

// forget makes e unfindable; it leaves the order with the next keep
// that reaches it.
func (rs *Replays) forget(e *replayed) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.byKey[e.key] == e {
		delete(rs.byKey, e.key)
	}
}

// drop forgets the oldest reply, which is old.
func (rs *Replays) drop(old *replayed) {
	rs.order[0] = nil
	rs.order = rs.order[1:]
	if rs.byKey[old.key] == old {
		delete(rs.byKey, old.key)
	}
	rs.bytes -= len(old.body)
	rs.n.Store(int64(len(rs.order)))
}

// replayWindow is the live config's window; 0 is off.
func (x *exchange) replayWindow() time.Duration {
	if w := x.gen.Snap.Config.Escalation.ReplayWindow; w != nil {
		return w.D()
	}
	return 0
}

// replay answers the request with the escalation its earlier copy got,
// when one is kept; it reports whether it did.
func (x *exchange) replay() bool {
	if x.replayWindow() <= 0 || x.env.Replays.n.Load() == 0 {
		return false
	}
	e := x.env.Replays.find(x.replayKey(), time.Now())
	if e == nil {
		return false
	}
	if e.approval != "" && !x.pending(e.approval) {
		// The ticket it carries was decided or expired: the request is
		// a new question now.
		x.env.Replays.forget(e)
		return false
	}
	x.out.escalationID, x.out.approvalID = e.escalation, e.approval
	x.env.Metrics.EscalationReplays.WithLabelValues(x.api.Name()).Inc()
	x.env.Log.Info("escalation replayed", zap.String("request_id", x.requestID), zap.String("escalation_id", e.escalation))
	x.write(pipeline.Reply{Status: statusReplayed, Label: e.label, Decided: true, ContentType: "application/json",
		NoRetry: true, Body: e.body})
	return true
}

// pending reports whether the approval a kept escalation holds still waits
// for a person; a store that cannot say makes it not.
func (x *exchange) pending(id string) bool {
	if x.env.Approvals == nil {
		return false
	}
	r, err := x.env.Approvals.Get(x.r.Context(), id)
	return err == nil && r.State == approval.Pending && time.Now().Before(r.ExpiresAt)
}

// keepReplay remembers an escalation reply for the request's retries.
func (x *exchange) keepReplay(rp *pipeline.Reply) {
	w := x.replayWindow()
	if w <= 0 || x.body == nil {
		return
	}
	x.env.Replays.keep(&replayed{key: x.replayKey(), expires: time.Now().Add(w), label: rp.Label,
		escalation: x.out.escalationID, approval: x.out.approvalID, body: rp.Body})
}

// replayKey is the request's key, worked out once. The caller is the
// inbound token it presented and the provider credentials it sent, so
// one caller is never answered with another's escalation; the catalog
// version makes a reload judge the request afresh.
func (x *exchange) replayKey() replayKey {
	if x.key != nil {
		return *x.key
	}
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(x.api.Name())
	field(x.r.URL.Path)
	field(x.r.URL.RawQuery)
	field(x.up.Name())
	field(x.gen.Snap.Version)
	field(CallerOf(x.w))
	credentials(x.r.Header, field)
	if d, err := approval.RequestDigest(x.body); err == nil {
		field("canonical")
		field(d)
	} else {
		// A body with no canonical form is the same request only byte
		// for byte.
		field("raw")
		field(string(x.body))
	}
	x.key = new(replayKey)
	h.Sum(x.key[:0])
	return *x.key
}

// credentials adds the provider credentials the request carries.
func credentials(hd http.Header, field func(string)) {
	for _, k := range upstream.CredentialHeaders {
		for _, v := range hd[k] {
			field(k)
			field(v)
		}
	}
}
