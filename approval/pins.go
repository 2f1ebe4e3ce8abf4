package approval

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"
)

// Pin is the definition of an MCP tool that toolgate lets through (docs/pins.md):
// pinned on first use, or a drifted definition a person accepted.
type Pin struct {
	Digest     string          `json:"digest"`
	Definition json.RawMessage `json:"definition"`
	By         string          `json:"by,omitempty"`
	At         time.Time       `json:"at"`
}

// Drift states.
const (
	DriftPending  = "pending"
	DriftRejected = "rejected"
)

// Drift is a listed definition unlike its pin, waiting for a person
// (on_drift: hold) or refused by one.
type Drift struct {
	Server       string          `json:"server"`
	Tool         string          `json:"tool"`
	State        string          `json:"state"`
	PinnedDigest string          `json:"pinned_digest,omitempty"`
	Pinned       json.RawMessage `json:"pinned,omitempty"`
	Digest       string          `json:"digest"`
	Definition   json.RawMessage `json:"definition"`
	// Diff is each member that differs: its JSON pointer, was and now.
	Diff      json.RawMessage `json:"diff"`
	Since     time.Time       `json:"since"`
	DecidedBy string          `json:"decided_by,omitempty"`
	DecidedAt time.Time       `json:"decided_at,omitzero"`
}

// PinStore keeps pins and drifts in approvals.store, shared by the
// replicas that share it.
type PinStore struct{ hashes pinHashes }

// pinHashes is the little of a store pins need: hashes of fields.
// setIfAbsent is atomic across replicas, so the first to pin a tool wins.
type pinHashes interface {
	allFields(ctx context.Context, bucket string) (map[string][]byte, error)
	setIfAbsent(ctx context.Context, bucket, field string, v []byte) ([]byte, error)
	setField(ctx context.Context, bucket, field string, v []byte) error
	deleteField(ctx context.Context, bucket, field string) error
}

// PinsOf returns the pin store of s, nil for a store that keeps none.
func PinsOf(s Store) *PinStore {
	if hashes, ok := s.(pinHashes); ok {
		return &PinStore{hashes: hashes}
	}
	return nil
}

// The stores that keep pins; PinsOf finds them by this interface at run
// time, so a method renamed on one side only would fail here, not there.
var (
	_ pinHashes = (*Memory)(nil)
	_ pinHashes = (*File)(nil)
	_ pinHashes = (*Redis)(nil)
)

func pinBucket(server string) string { return "pins:" + server }

const driftBucket = "drifts"

func driftField(server, tool string) string { return server + "\x00" + tool }

// Pins returns the pins of a server's tools, by tool name.
func (p *PinStore) Pins(ctx context.Context, server string) (map[string]Pin, error) {
	all, err := p.hashes.allFields(ctx, pinBucket(server))
	if err != nil {
		return nil, err
	}
	out := make(map[string]Pin, len(all))
	for tool, b := range all {
		var pin Pin
		if json.Unmarshal(b, &pin) == nil {
			out[tool] = pin
		}
	}
	return out, nil
}

// PinFirst pins a tool's definition unless it has a pin, and returns the
// pin in force: another replica's when it was first.
func (p *PinStore) PinFirst(ctx context.Context, server, tool string, pin Pin) (Pin, error) {
	b, _ := json.Marshal(pin)
	got, err := p.hashes.setIfAbsent(ctx, pinBucket(server), tool, b)
	if err != nil {
		return Pin{}, err
	}
	var in Pin
	if err := json.Unmarshal(got, &in); err != nil {
		return Pin{}, unavailableErr(err)
	}
	return in, nil
}

// Drifted records a drift for a person, keeping the one recorded when it
// is the same definition (a rejected one stays rejected). It returns the
// drift in force.
func (p *PinStore) Drifted(ctx context.Context, d Drift) (Drift, error) {
	all, err := p.hashes.allFields(ctx, driftBucket)
	if err != nil {
		return Drift{}, err
	}
	var have Drift
	if b, ok := all[driftField(d.Server, d.Tool)]; ok && json.Unmarshal(b, &have) == nil && have.Digest == d.Digest {
		return have, nil
	}
	d.State = DriftPending
	b, _ := json.Marshal(d)
	return d, p.hashes.setField(ctx, driftBucket, driftField(d.Server, d.Tool), b)
}

// Drifts lists the recorded drifts by server and tool.
func (p *PinStore) Drifts(ctx context.Context) ([]Drift, error) {
	all, err := p.hashes.allFields(ctx, driftBucket)
	if err != nil {
		return nil, err
	}
	out := make([]Drift, 0, len(all))
	for _, b := range all {
		var d Drift
		if json.Unmarshal(b, &d) == nil {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Server != out[j].Server {
			return out[i].Server < out[j].Server
		}
		return out[i].Tool < out[j].Tool
	})
	return out, nil
}

// ErrNoDrift is a decision on a tool with no drift recorded.
var ErrNoDrift = errors.New("no drifted definition of this tool awaits a decision")

// Resolve decides a recorded drift: accepted, its definition becomes the
// tool's pin and the drift is gone; rejected, it stays refused.
func (p *PinStore) Resolve(ctx context.Context, server, tool string, accept bool, by string, at time.Time) (Drift, error) {
	all, err := p.hashes.allFields(ctx, driftBucket)
	if err != nil {
		return Drift{}, err
	}
	b, ok := all[driftField(server, tool)]
	var d Drift
	if !ok || json.Unmarshal(b, &d) != nil {
		return Drift{}, ErrNoDrift
	}
	d.DecidedBy, d.DecidedAt = by, at
	if !accept {
		d.State = DriftRejected
		b, _ := json.Marshal(d)
		return d, p.hashes.setField(ctx, driftBucket, driftField(server, tool), b)
	}
	pb, _ := json.Marshal(Pin{Digest: d.Digest, Definition: d.Definition, By: by, At: at})
	if err := p.hashes.setField(ctx, pinBucket(server), tool, pb); err != nil {
		return Drift{}, err
	}
	d.State = "accepted"
	return d, p.hashes.deleteField(ctx, driftBucket, driftField(server, tool))
}

// The memory store's hashes.

type memHashes struct {
	mu      sync.Mutex
	buckets map[string]map[string][]byte
}

func (h *memHashes) allFields(_ context.Context, bucket string) (map[string][]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range h.buckets[bucket] {
		out[k] = v
	}
	return out, nil
}

func (h *memHashes) setIfAbsent(_ context.Context, bucket, field string, v []byte) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if have, ok := h.buckets[bucket][field]; ok {
		return have, nil
	}
	h.put(bucket, field, v)
	return v, nil
}

func (h *memHashes) put(bucket, field string, v []byte) {
	if h.buckets == nil {
		h.buckets = map[string]map[string][]byte{}
	}
	if h.buckets[bucket] == nil {
		h.buckets[bucket] = map[string][]byte{}
	}
	h.buckets[bucket][field] = v
}

func (h *memHashes) setField(_ context.Context, bucket, field string, v []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.put(bucket, field, v)
	return nil
}

func (h *memHashes) deleteField(_ context.Context, bucket, field string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.buckets[bucket], field)
	return nil
}

func (s *Memory) allFields(ctx context.Context, b string) (map[string][]byte, error) {
	return s.pins.allFields(ctx, b)
}
func (s *Memory) setIfAbsent(ctx context.Context, b, f string, v []byte) ([]byte, error) {
	return s.pins.setIfAbsent(ctx, b, f, v)
}
func (s *Memory) setField(ctx context.Context, b, f string, v []byte) error {
	return s.pins.setField(ctx, b, f, v)
}
func (s *Memory) deleteField(ctx context.Context, b, f string) error {
	return s.pins.deleteField(ctx, b, f)
}

// The redis store's hashes: one redis hash each, under the approvals'
// prefix. HSETNX makes the first replica's pin the one in force.

func (s *Redis) bucketKey(bucket string) string { return s.prefix + bucket }

func (s *Redis) allFields(ctx context.Context, bucket string) (map[string][]byte, error) {
	m, err := s.client.HGetAll(ctx, s.bucketKey(bucket)).Result()
	if err != nil {
		return nil, unavailableErr(err)
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out, nil
}

func (s *Redis) setIfAbsent(ctx context.Context, bucket, field string, v []byte) ([]byte, error) {
	ok, err := s.client.HSetNX(ctx, s.bucketKey(bucket), field, v).Result()
	if err != nil {
		return nil, unavailableErr(err)
	}
	if ok {
		return v, nil
	}
	got, err := s.client.HGet(ctx, s.bucketKey(bucket), field).Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailableErr(err)
	}
	return got, nil
}

func (s *Redis) setField(ctx context.Context, bucket, field string, v []byte) error {
	if err := s.client.HSet(ctx, s.bucketKey(bucket), field, v).Err(); err != nil {
		return unavailableErr(err)
	}
	return nil
}

func (s *Redis) deleteField(ctx context.Context, bucket, field string) error {
	if err := s.client.HDel(ctx, s.bucketKey(bucket), field).Err(); err != nil {
		return unavailableErr(err)
	}
	return nil
}

// The file store's hashes: one bbolt bucket, keys bucket NUL field.

var pinsBucket = []byte("pins")

func fileKey(bucket, field string) []byte { return []byte(bucket + "\x00" + field) }

func (s *File) allFields(_ context.Context, bucket string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(pinsBucket)
		if b == nil {
			return nil
		}
		prefix := bucket + "\x00"
		c := b.Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			out[strings.TrimPrefix(string(k), prefix)] = append([]byte(nil), v...)
		}
		return nil
	})
	return out, result(err)
}

func (s *File) setIfAbsent(_ context.Context, bucket, field string, v []byte) ([]byte, error) {
	got := v
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(pinsBucket)
		if err != nil {
			return err
		}
		if have := b.Get(fileKey(bucket, field)); have != nil {
			got = append([]byte(nil), have...)
			return nil
		}
		return b.Put(fileKey(bucket, field), v)
	})
	return got, result(err)
}

func (s *File) setField(_ context.Context, bucket, field string, v []byte) error {
	return result(s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(pinsBucket)
		if err != nil {
			return err
		}
		return b.Put(fileKey(bucket, field), v)
	}))
}

func (s *File) deleteField(_ context.Context, bucket, field string) error {
	return result(s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(pinsBucket)
		if b == nil {
			return nil
		}
		return b.Delete(fileKey(bucket, field))
	}))
}
