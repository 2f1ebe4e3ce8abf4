package jsonx

import (
	"encoding/binary"
	"sort"
)

// Follow reads data into t as Read does, taking what it can from prev, a
// reading of the same stream's previous event whose Data is still intact.
// A stream's events repeat each other but for one string: every Chat
// chunk carries the same id, object, created, model and fingerprint
// around its text or arguments fragment, every Messages delta the same
// type and index. When data is prev.Data with the content of one string
// changed, only that string is read: the rest is byte for byte a document
// prev found to be JSON, so it still is, and its tape is prev's with the
// places after the string moved.
//
// t ends as Read(data) leaves it, and ok is what Read reports, whichever
// way it was read (FuzzFollow holds it to that). sameKeys reports that
// data's object keys are prev's, byte for byte, which only the short way
// can tell: a verdict on prev's keys holds for data's.
func (t *Text) Follow(prev *Text, data []byte) (ok, sameKeys bool) {
	if prev == nil || !prev.valid || prev.NotUTF8 || int64(len(data)) >= 1<<31 {
		return t.Read(data), false
	}
	old := prev.Data
	p := commonPrefix(old, data)
	q := commonSuffix(old[p:], data[p:])
	// old[p:len(old)-q] is what old has where data differs: it must lie
	// within the content of one string, its quotes outside it.
	if len(old) == len(data) && p == len(old) {
		t.adopt(prev, data)
		t.followed, t.changed = true, -1
		return true, true
	}
	n := prev.stringAround(p, len(old)-q)
	if n < 0 {
		return t.Read(data), false
	}
	str := prev.Nodes[n]
	delta := int32(len(data) - len(old))
	// The changed string is read where it opens; its closing quote must be
	// the one old's suffix begins with, moved.
	s := tapeScan{d: data, nodes: t.Nodes[:0], limit: maxDepth, utf8: true}
	end, strOK := s.str(int(str.Start) - 1)
	if !strOK || end != int(str.End+delta)+1 {
		return t.Read(data), false
	}
	escaped, notUTF8 := s.nodes[0].Escaped, s.notUTF8
	// The nodes before the string are prev's; of the rest, what begins
	// after the string moves, and what holds it ends later.
	t.Data, t.NotUTF8, t.valid, t.followed, t.changed = data, notUTF8, true, true, n
	t.Nodes = append(t.Nodes[:0], prev.Nodes...)
	for i := n; i < len(t.Nodes); i++ {
		nd := &t.Nodes[i]
		nd.Start += delta
		nd.End += delta
	}
	for i := 0; i <= n; i++ {
		if nd := &t.Nodes[i]; nd.End > str.End {
			nd.End += delta
		}
	}
	t.Nodes[n] = Node{Kind: '"', Escaped: escaped, Start: str.Start, End: str.End + delta, Next: str.Next}
	return true, !prev.isKey(n)
}

// Changed reports how t was read: followed is true when Follow took the
// short way, and node is then the string whose content differs from
// prev's (-1 when none does); every other node is prev's, moved.
func (t *Text) Changed() (node int, followed bool) {
	if !t.followed {
		return -1, false
	}
	return t.changed, true
}

// adopt makes t prev's reading of data, which has prev's tape.
func (t *Text) adopt(prev *Text, data []byte) {
	t.Data, t.Nodes, t.NotUTF8, t.valid = data, append(t.Nodes[:0], prev.Nodes...), prev.NotUTF8, true
}

// Keep makes t a copy of from that owns its bytes, for Follow to read the
// next event against once the buffer from's Data lies in is reused.
func (t *Text) Keep(from *Text) {
	// Events of one stream differ in length by a fragment: a little room
	// saves growing the copy event after event, and a held stream keeps
	// no more than that.
	if cap(t.Data) < len(from.Data) {
		t.Data = make([]byte, 0, len(from.Data)+64)
	}
	if cap(t.Nodes) < len(from.Nodes) {
		t.Nodes = make([]Node, 0, len(from.Nodes)+4)
	}
	t.Data = append(t.Data[:0], from.Data...)
	t.Nodes = append(t.Nodes[:0], from.Nodes...)
	t.NotUTF8, t.valid = from.NotUTF8, from.valid
}

// stringAround is the string node whose content holds old's bytes
// [lo, hi), its quotes outside them, or -1. Strings do not nest, so at
// most one does.
func (t *Text) stringAround(lo, hi int) int {
	// Nodes are in the order their values begin: the candidate is the
	// last node to begin at or before lo.
	i := sort.Search(len(t.Nodes), func(i int) bool { return int(t.Nodes[i].Start) > lo }) - 1
	if i < 0 {
		return -1
	}
	if nd := &t.Nodes[i]; nd.Kind != '"' || hi > int(nd.End) {
		return -1
	}
	return i
}

// isKey reports whether string node n is a member's name. Its innermost
// container is the last node before it that encloses it.
func (t *Text) isKey(n int) bool {
	at := t.Nodes[n].Start
	for c := n - 1; c >= 0; c-- {
		nd := &t.Nodes[c]
		if (nd.Kind != '{' && nd.Kind != '[') || nd.Start >= at || nd.End <= at {
			continue
		}
		if nd.Kind == '[' {
			return false
		}
		for j, k := c+1, 0; k < int(nd.Len) && j <= n; k, j = k+1, int(t.Nodes[j+1].Next) {
			if j == n {
				return true
			}
		}
		return false
	}
	return false
}

// commonPrefix is the length of the longest prefix a and b share.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && binary.LittleEndian.Uint64(a[i:]) == binary.LittleEndian.Uint64(b[i:]) {
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix is the length of the longest suffix a and b share.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && binary.LittleEndian.Uint64(a[len(a)-i-8:]) == binary.LittleEndian.Uint64(b[len(b)-i-8:]) {
		i += 8
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}
