package exchange

import (
	"bytes"
	"testing"
	"time"
)

func replayEntry(i int, body []byte, expires time.Time) *replayed {
	var k replayKey
	k[0], k[1] = byte(i), byte(i>>8)
	return &replayed{key: k, expires: expires, escalation: "esc_x", body: body}
}

func TestReplaysExpire(t *testing.T) {
	var rs Replays
	now := time.Now()
	e := replayEntry(1, []byte(`{}`), now.Add(time.Minute))
	rs.keep(e)
	if rs.find(e.key, now) != e {
		t.Fatal("a kept reply is not found within its window")
	}
	if rs.find(e.key, now.Add(time.Minute)) != nil {
		t.Error("a reply is found after its window")
	}
	var other replayKey
	if rs.find(other, now) != nil {
		t.Error("another key finds the reply")
	}
	// A later keep sweeps the expired one out.
	rs.order[0].expires = now.Add(-time.Second)
	rs.keep(replayEntry(2, []byte(`{}`), now.Add(time.Minute)))
	if len(rs.order) != 1 || rs.n.Load() != 1 || rs.byKey[e.key] != nil {
		t.Errorf("expired reply kept: %d entries", len(rs.order))
	}
}

func TestReplaysStayBounded(t *testing.T) {
	var rs Replays
	exp := time.Now().Add(time.Hour)
	for i := range maxReplayEntries + 10 {
		rs.keep(replayEntry(i, []byte(`{}`), exp))
	}
	if len(rs.order) != maxReplayEntries || len(rs.byKey) != maxReplayEntries {
		t.Fatalf("%d entries, %d keys; want at most %d", len(rs.order), len(rs.byKey), maxReplayEntries)
	}
	if rs.find(replayEntry(0, nil, exp).key, time.Now()) != nil {
		t.Error("the oldest reply survived the bound")
	}

	rs = Replays{}
	big := bytes.Repeat([]byte("x"), maxReplayBodySize)
	for i := range maxReplayBytes/maxReplayBodySize + 3 {
		rs.keep(replayEntry(i, big, exp))
	}
	if rs.bytes > maxReplayBytes {
		t.Errorf("%d bytes kept, bound %d", rs.bytes, maxReplayBytes)
	}
	rs.keep(replayEntry(9999, append(big, 'x'), exp))
	if rs.find(replayEntry(9999, nil, exp).key, time.Now()) != nil {
		t.Error("a reply over the body bound was kept")
	}
}

func TestReplayKeepsTheFirstReply(t *testing.T) {
	var rs Replays
	exp := time.Now().Add(time.Hour)
	first := replayEntry(7, []byte(`first`), exp)
	rs.keep(first)
	rs.keep(replayEntry(7, []byte(`second`), exp))
	if got := rs.find(first.key, time.Now()); got != first || len(rs.order) != 1 {
		t.Errorf("kept %+v, %d entries", got, len(rs.order))
	}
}
