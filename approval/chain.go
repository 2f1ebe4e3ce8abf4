package approval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// chain links the events one Service emits: each carries the digest of
// the one before, in the order they reach the audit function. One process
// is one chain; replicas writing their own sink files, or one shared
// file, each keep theirs, told apart by the chain id.
type chain struct {
	id   string
	mu   sync.Mutex
	seq  uint64
	prev string
}

// link numbers e, points it at the previous event and hands it on, under
// the lock so the order the events reach audit is the chain's order.
func (c *chain) link(e Event, audit func(Event)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	e.Chain, e.Seq, e.Prev = c.id, c.seq, c.prev
	if d, err := eventDigest(e); err == nil {
		c.prev = d
	}
	audit(e)
}

// eventDigest is the digest of an event's canonical JSON: the same for
// the event as emitted and as read back from any sink line.
func eventDigest(e Event) (string, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	return rawDigest(b)
}

func rawDigest(b []byte) (string, error) {
	c, err := Canonical(b)
	if err != nil {
		return "", err
	}
	return Digest(c), nil
}

// ChainError says where a sink file's approval chain breaks.
type ChainError struct {
	// Line is the 1-based line of the first record that does not follow.
	Line int
	Msg  string
}

func (e *ChainError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// maxLine bounds one sink line (an escalation record with its attempts).
const maxLine = 16 << 20

// VerifyChain reads a sink file (one JSON record a line) and checks every
// approval record's link: each chain starts at seq 1 with no prev, and
// each later record names the digest of its chain's previous one. Other
// records are skipped. It returns how many approval records it checked,
// and a *ChainError at the first that breaks a chain. Records removed
// from the end of a chain leave nothing behind to notice.
func VerifyChain(r io.Reader) (int, error) {
	type tip struct {
		seq    uint64
		digest string
	}
	tips := map[string]tip{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n, line := 0, 0
	for sc.Scan() {
		line++
		var rec struct {
			Approval json.RawMessage `json:"approval"`
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return n, &ChainError{Line: line, Msg: "not a JSON record: " + err.Error()}
		}
		if len(rec.Approval) == 0 || string(rec.Approval) == "null" {
			continue
		}
		var e Event
		if err := json.Unmarshal(rec.Approval, &e); err != nil {
			return n, &ChainError{Line: line, Msg: "approval record unreadable: " + err.Error()}
		}
		d, err := rawDigest(rec.Approval)
		if err != nil {
			return n, &ChainError{Line: line, Msg: "approval record has no canonical form: " + err.Error()}
		}
		if e.Chain == "" || e.Seq == 0 {
			return n, &ChainError{Line: line, Msg: "approval record " + e.ApprovalID + " carries no chain and seq"}
		}
		t := tips[e.Chain]
		switch {
		case e.Seq != t.seq+1:
			return n, &ChainError{Line: line, Msg: fmt.Sprintf("chain %s: record %d follows record %d; a record is missing or out of order", e.Chain, e.Seq, t.seq)}
		case e.Prev != t.digest:
			return n, &ChainError{Line: line, Msg: fmt.Sprintf("chain %s: record %d names prev %q, but the record before it digests to %q; it was altered", e.Chain, e.Seq, e.Prev, t.digest)}
		}
		tips[e.Chain] = tip{seq: e.Seq, digest: d}
		n++
	}
	if err := sc.Err(); err != nil {
		return n, &ChainError{Line: line + 1, Msg: err.Error()}
	}
	return n, nil
}
