package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// File is a store in one bbolt file: it survives a restart, for one
// replica (bbolt locks the file). bbolt runs one writing transaction at a
// time, so each Decide and Claim is atomic.
type File struct {
	opts Options
	db   *bolt.DB
}

// Records and their held answers live apart, so listing, counting and
// sweeping never read the answers.
var (
	recordsBucket = []byte("approvals")
	heldBucket    = []byte("held")
)

// openTimeout bounds the wait for another process's lock on the file.
const openTimeout = 2 * time.Second

// OpenFile opens (creating it 0600 if needed) the store at path.
func OpenFile(path string, o Options) (*File, error) {
	if dir := filepath.Dir(path); dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("approvals.store file:%s: %w", path, err)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("approvals.store file:%s is locked by another process (a file store serves one replica; use redis:// for several)", path)
		}
		return nil, fmt.Errorf("approvals.store file:%s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(recordsBucket); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(heldBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("approvals.store file:%s: %w", path, err)
	}
	return &File{opts: o.withDefaults(), db: db}, nil
}

// Close implements Store.
func (s *File) Close() error { return s.db.Close() }

func getRecord(tx *bolt.Tx, id string) (*Record, error) {
	v := tx.Bucket(recordsBucket).Get([]byte(id))
	if v == nil {
		return nil, refuse(CodeUnknown, "")
	}
	r := &Record{}
	if err := json.Unmarshal(v, r); err != nil {
		return nil, fmt.Errorf("approval %s: stored record unreadable: %w", id, err)
	}
	return r, nil
}

func putRecord(tx *bolt.Tx, r *Record) error {
	held := r.Held
	r.Held = nil
	b, err := json.Marshal(r)
	r.Held = held
	if err != nil {
		return err
	}
	if err := tx.Bucket(recordsBucket).Put([]byte(r.ID), b); err != nil {
		return err
	}
	if held == nil {
		return tx.Bucket(heldBucket).Delete([]byte(r.ID))
	}
	return tx.Bucket(heldBucket).Put([]byte(r.ID), held)
}

func withHeld(tx *bolt.Tx, r *Record) *Record {
	if v := tx.Bucket(heldBucket).Get([]byte(r.ID)); v != nil {
		r.Held = append([]byte(nil), v...)
	}
	return r
}

// result sorts a transaction's error: the state machine's refusals pass
// as they are, the rest mean the file failed us.
func result(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := AsRefusal(err); ok {
		return err
	}
	return unavailableErr(err)
}

// Put implements Store.
func (s *File) Put(_ context.Context, r *Record) error {
	c := clone(r, true)
	return result(s.db.Update(func(tx *bolt.Tx) error { return putRecord(tx, c) }))
}

// Get implements Store.
func (s *File) Get(_ context.Context, id string) (*Record, error) {
	var out *Record
	err := s.db.View(func(tx *bolt.Tx) error {
		r, err := getRecord(tx, id)
		if err != nil {
			return err
		}
		out = withHeld(tx, r).asOf(s.opts.Now())
		return nil
	})
	return out, result(err)
}

// List implements Store.
func (s *File) List(_ context.Context, st State) ([]*Record, error) {
	now := s.opts.Now()
	var out []*Record
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(recordsBucket).ForEach(func(k, v []byte) error {
			r := &Record{}
			if err := json.Unmarshal(v, r); err != nil {
				return nil // one unreadable record must not hide the rest
			}
			if r.asOf(now); st == "" || r.State == st {
				out = append(out, r)
			}
			return nil
		})
	})
	sortRecords(out)
	return out, result(err)
}

// Decide implements Store.
func (s *File) Decide(_ context.Context, id string, d Decision) (*Record, error) {
	var out *Record
	err := s.db.Update(func(tx *bolt.Tx) error {
		r, err := getRecord(tx, id)
		if err != nil {
			return err
		}
		if err := decide(withHeld(tx, r), d, s.opts.Now()); err != nil {
			return err
		}
		out = clone(r, false)
		return putRecord(tx, r)
	})
	return out, result(err)
}

// Claim implements Store.
func (s *File) Claim(_ context.Context, id string, m Match) (*Record, error) {
	var out *Record
	err := s.db.Update(func(tx *bolt.Tx) error {
		r, err := getRecord(tx, id)
		if err != nil {
			return err
		}
		now := s.opts.Now()
		if err := checkRelease(r, m, now); err != nil {
			return err
		}
		release(withHeld(tx, r), now)
		out = clone(r, true)
		r.Held = nil
		return putRecord(tx, r)
	})
	return out, result(err)
}

// Sweep implements Store.
func (s *File) Sweep(context.Context) ([]*Record, error) {
	now := s.opts.Now()
	var expired []*Record
	err := s.db.Update(func(tx *bolt.Tx) error {
		var drop, final []*Record
		err := tx.Bucket(recordsBucket).ForEach(func(k, v []byte) error {
			r := &Record{}
			if json.Unmarshal(v, r) != nil || r.live(now) {
				return nil
			}
			if r.State == Pending || r.State == Approved {
				final = append(final, r.asOf(now))
			}
			if now.After(r.ExpiresAt.Add(s.opts.Linger)) {
				drop = append(drop, r)
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Writing inside ForEach is not allowed; the changes follow it.
		for _, r := range final {
			if err := putRecord(tx, r); err != nil {
				return err
			}
		}
		for _, r := range drop {
			if err := tx.Bucket(recordsBucket).Delete([]byte(r.ID)); err != nil {
				return err
			}
			if err := tx.Bucket(heldBucket).Delete([]byte(r.ID)); err != nil {
				return err
			}
		}
		expired = final
		return nil
	})
	sortRecords(expired)
	return expired, result(err)
}

// Pending implements Store.
func (s *File) Pending(context.Context) (int, error) {
	now := s.opts.Now()
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(recordsBucket).ForEach(func(k, v []byte) error {
			var r struct {
				State     State     `json:"state"`
				ExpiresAt time.Time `json:"expires_at"`
			}
			if json.Unmarshal(v, &r) == nil && r.State == Pending && now.Before(r.ExpiresAt) {
				n++
			}
			return nil
		})
	})
	return n, result(err)
}
