package approval

import (
	"context"
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

// UseOnce keeps a single-use token used beyond the replica that took it:
// a signed MCP requestState, whose digest is the key, is released once
// whichever replica the client sends it to. A key lives as long as the
// token could still be presented (ttl), so the stores hold only live keys.

// UseOnce implements Store.
func (s *Memory) UseOnce(_ context.Context, key string, ttl time.Duration) (bool, error) {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.once == nil {
		s.once = map[string]time.Time{}
	}
	if exp, ok := s.once[key]; ok && now.Before(exp) {
		return false, nil
	}
	// Confirmations come at a person's pace, so the walk over the live
	// keys costs little and keeps the map from growing.
	for k, exp := range s.once {
		if !now.Before(exp) {
			delete(s.once, k)
		}
	}
	s.once[key] = now.Add(ttl)
	return true, nil
}

var onceBucket = []byte("once")

// UseOnce implements Store: the check and the mark are one bbolt
// transaction.
func (s *File) UseOnce(_ context.Context, key string, ttl time.Duration) (bool, error) {
	now := s.opts.Now()
	fresh := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(onceBucket)
		if err != nil {
			return err
		}
		if v := b.Get([]byte(key)); len(v) == 8 && now.UnixMilli() < int64(binary.BigEndian.Uint64(v)) {
			return nil
		}
		var stale [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(v) != 8 || now.UnixMilli() >= int64(binary.BigEndian.Uint64(v)) {
				stale = append(stale, append([]byte(nil), k...))
			}
		}
		for _, k := range stale {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		fresh = true
		return b.Put([]byte(key), binary.BigEndian.AppendUint64(nil, uint64(now.Add(ttl).UnixMilli())))
	})
	if err != nil {
		return false, result(err)
	}
	return fresh, nil
}

// UseOnce implements Store: SET NX PX, one atomic step in redis, which
// drops the key itself when ttl ends. A reply lost on the way back leaves
// the key set and answers ErrUnavailable, so the token's holder is told to
// retry and the retry is refused as used: the failure runs the call never,
// not twice.
func (s *Redis) UseOnce(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if ttl < time.Millisecond {
		ttl = time.Millisecond
	}
	ok, err := s.client.SetNX(ctx, s.prefix+"once:"+key, "1", ttl).Result()
	if err != nil {
		return false, unavailableErr(err)
	}
	return ok, nil
}

// UseOnce marks key used for ttl in the store every replica shares and
// reports whether it was unused; an unreachable store is an error wrapping
// ErrUnavailable.
func (s *Service) UseOnce(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return s.cfg.Store.UseOnce(ctx, key, ttl)
}
