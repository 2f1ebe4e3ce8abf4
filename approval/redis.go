package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a store shared by every replica. Each record is a hash; three
// sorted sets index them: live (pending and approved, by expires_at),
// pending (by expires_at, for the gauge) and all (by the time the record
// is dropped, for listing). Decide, Claim and Sweep are each one Lua
// script, which redis runs without interleaving anything else, so a claim
// from two replicas at once releases once. Every key carries the same hash
// tag, so the scripts' keys share a slot.
type Redis struct {
	o      Options
	c      *redis.Client
	prefix string
}

const redisPrefix = "toolgate:{approvals}:"

// redisTimeout bounds each round trip: a store that does not answer is
// unavailable, and the client gets a 503 it may retry.
const redisTimeout = 2 * time.Second

// OpenRedis returns a store on the redis at addr, database db. It does not
// wait for the server: an unreachable one answers ErrUnavailable per call.
func OpenRedis(_ context.Context, addr string, db int, o Options) (*Redis, error) {
	c := redis.NewClient(&redis.Options{
		Addr: addr, DB: db,
		DialTimeout: redisTimeout, ReadTimeout: redisTimeout, WriteTimeout: redisTimeout,
		// A script retried after a lost reply could run twice; a claim
		// must answer once, so a failed round trip is the caller's 503.
		MaxRetries: -1,
		// Fail fast when the server is down: the client retries the 503.
		DialerRetries: 2,
	})
	return &Redis{o: o.withDefaults(), c: c, prefix: redisPrefix}, nil
}

// Ping checks that the server answers.
func (s *Redis) Ping(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return unavailableErr(err)
	}
	return nil
}

// Close implements Store.
func (s *Redis) Close() error { return s.c.Close() }

func (s *Redis) key(id string) string { return s.prefix + "rec:" + id }
func (s *Redis) live() string         { return s.prefix + "live" }
func (s *Redis) pending() string      { return s.prefix + "pending" }
func (s *Redis) all() string          { return s.prefix + "all" }

func ms(t time.Time) int64 { return t.UnixMilli() }

// Put implements Store: the hash, its expiry and the index entries in one
// MULTI.
func (s *Redis) Put(ctx context.Context, r *Record) error {
	imm := clone(r, false)
	imm.State, imm.DecidedBy, imm.DecidedAt, imm.Note, imm.ReleasedAt = "", "", time.Time{}, "", time.Time{}
	b, err := json.Marshal(imm)
	if err != nil {
		return err
	}
	keep := r.ExpiresAt.Add(s.o.Linger)
	k := s.key(r.ID)
	_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		fields := []any{"rec", b, "state", string(r.State), "exp", ms(r.ExpiresAt)}
		if r.Held != nil {
			fields = append(fields, "held", r.Held)
		}
		p.HSet(ctx, k, fields...)
		p.PExpireAt(ctx, k, keep)
		p.ZAdd(ctx, s.all(), redis.Z{Score: float64(ms(keep)), Member: r.ID})
		if r.State == Pending || r.State == Approved {
			p.ZAdd(ctx, s.live(), redis.Z{Score: float64(ms(r.ExpiresAt)), Member: r.ID})
		}
		if r.State == Pending {
			p.ZAdd(ctx, s.pending(), redis.Z{Score: float64(ms(r.ExpiresAt)), Member: r.ID})
		}
		return nil
	})
	if err != nil {
		return unavailableErr(err)
	}
	return nil
}

// fromHash builds a record from its hash fields.
func fromHash(id string, h map[string]string) (*Record, error) {
	r := &Record{}
	if err := json.Unmarshal([]byte(h["rec"]), r); err != nil {
		return nil, fmt.Errorf("approval %s: stored record unreadable: %w", id, err)
	}
	r.State = State(h["state"])
	r.DecidedBy, r.Note = h["by"], h["note"]
	if v, err := strconv.ParseInt(h["at"], 10, 64); err == nil {
		r.DecidedAt = time.UnixMilli(v).UTC()
	}
	if v, err := strconv.ParseInt(h["rel"], 10, 64); err == nil {
		r.ReleasedAt = time.UnixMilli(v).UTC()
	}
	if v, ok := h["held"]; ok {
		r.Held = []byte(v)
	}
	return r, nil
}

// Get implements Store.
func (s *Redis) Get(ctx context.Context, id string) (*Record, error) {
	h, err := s.c.HGetAll(ctx, s.key(id)).Result()
	if err != nil {
		return nil, unavailableErr(err)
	}
	if len(h) == 0 || h["rec"] == "" {
		return nil, refuse(CodeUnknown, "")
	}
	r, err := fromHash(id, h)
	if err != nil {
		return nil, err
	}
	return r.at(s.o.Now()), nil
}

var listFields = []string{"rec", "state", "by", "at", "note", "rel"}

// List implements Store.
func (s *Redis) List(ctx context.Context, st State) ([]*Record, error) {
	now := s.o.Now()
	ids, err := s.c.ZRangeByScore(ctx, s.all(), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(ms(now), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, unavailableErr(err)
	}
	cmds, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.HMGet(ctx, s.key(id), listFields...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailableErr(err)
	}
	var out []*Record
	for i, cmd := range cmds {
		vals := cmd.(*redis.SliceCmd).Val()
		h := map[string]string{}
		for j, v := range vals {
			if sv, ok := v.(string); ok {
				h[listFields[j]] = sv
			}
		}
		if h["rec"] == "" {
			continue // dropped since the index was read
		}
		r, err := fromHash(ids[i], h)
		if err != nil {
			continue
		}
		if r.at(now); st == "" || r.State == st {
			out = append(out, r)
		}
	}
	sortRecords(out)
	return out, nil
}

// decideScript moves a pending, unexpired record to ARGV[2]. It answers
// {"ok", rec} or {refusal, state}.
var decideScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return {'unknown', ''} end
local now = tonumber(ARGV[1])
if (st == 'pending' or st == 'approved') and now >= tonumber(redis.call('HGET', KEYS[1], 'exp')) then
  return {'expired', st}
end
if st ~= 'pending' then return {'decided', st} end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'by', ARGV[3], 'note', ARGV[4], 'at', ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[5])
if ARGV[2] == 'denied' then
  redis.call('HDEL', KEYS[1], 'held')
  redis.call('ZREM', KEYS[2], ARGV[5])
end
return {'ok', redis.call('HGET', KEYS[1], 'rec')}
`)

// Decide implements Store.
func (s *Redis) Decide(ctx context.Context, id string, d Decision) (*Record, error) {
	now := s.o.Now()
	to := Denied
	if d.Approve {
		to = Approved
	}
	res, err := decideScript.Run(ctx, s.c, []string{s.key(id), s.live(), s.pending()},
		ms(now), string(to), d.By, d.Note, id).StringSlice()
	if err != nil {
		return nil, unavailableErr(err)
	}
	switch res[0] {
	case "ok":
		r, err := fromHash(id, map[string]string{"rec": res[1]})
		if err != nil {
			return nil, err
		}
		r.State, r.DecidedBy, r.Note, r.DecidedAt = to, d.By, d.Note, time.UnixMilli(ms(now)).UTC()
		return r, nil
	case "unknown":
		return nil, refuse(CodeUnknown, "")
	case "expired":
		return nil, refuse(CodeExpired, Expired)
	}
	return nil, refuse(CodeDecided, State(res[1]))
}

// claimScript releases an approved record, or a pending one when ARGV[3]
// is "1" (a caller approval whose secret was checked). It answers
// {"ok", held, by, at, note} or {refusal state}.
var claimScript = redis.NewScript(`
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return {'unknown'} end
local now = tonumber(ARGV[1])
if (st == 'pending' or st == 'approved') and now >= tonumber(redis.call('HGET', KEYS[1], 'exp')) then
  return {'expired'}
end
if st == 'approved' or (st == 'pending' and ARGV[3] == '1') then
  local f = redis.call('HMGET', KEYS[1], 'held', 'by', 'at', 'note')
  redis.call('HSET', KEYS[1], 'state', 'released', 'rel', ARGV[1])
  redis.call('HDEL', KEYS[1], 'held')
  redis.call('ZREM', KEYS[2], ARGV[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
  return {'ok', f[1], f[2], f[3], f[4]}
end
return {st}
`)

// Claim implements Store. The request and the secret are checked against
// the record's fields that never change, in Go (the secret in constant
// time); the state is checked and moved by the script, atomically.
func (s *Redis) Claim(ctx context.Context, id string, m Match) (*Record, error) {
	rec, err := s.c.HGet(ctx, s.key(id), "rec").Result()
	if errors.Is(err, redis.Nil) {
		return nil, refuse(CodeUnknown, "")
	}
	if err != nil {
		return nil, unavailableErr(err)
	}
	r, err := fromHash(id, map[string]string{"rec": rec})
	if err != nil {
		return nil, err
	}
	if err := checkMatch(r, m); err != nil {
		return nil, err
	}
	caller := "0"
	if r.Approver == Caller {
		caller = "1"
	}
	now := s.o.Now()
	res, err := claimScript.Run(ctx, s.c, []string{s.key(id), s.live(), s.pending()}, ms(now), id, caller).Slice()
	if err != nil {
		return nil, unavailableErr(err)
	}
	return claimed(r, res, now)
}

// claimed reads the claim script's answer.
func claimed(r *Record, res []any, now time.Time) (*Record, error) {
	str := func(i int) string {
		if i < len(res) {
			if v, ok := res[i].(string); ok {
				return v
			}
		}
		return ""
	}
	switch st := str(0); st {
	case "ok":
		r.Held = nil
		if len(res) > 1 && res[1] != nil {
			r.Held = []byte(str(1))
		}
		r.DecidedBy, r.Note = str(2), str(4)
		if v, err := strconv.ParseInt(str(3), 10, 64); err == nil {
			r.DecidedAt = time.UnixMilli(v).UTC()
		}
		release(r, now)
		return r, nil
	case "unknown":
		return nil, refuse(CodeUnknown, "")
	case "expired":
		return nil, refuse(CodeExpired, Expired)
	case "pending":
		return nil, refuse(CodePending, Pending)
	case "denied":
		return nil, refuse(CodeDenied, Denied)
	default:
		return nil, refuse(CodeUsed, State(st))
	}
}

// sweepScript marks every live record past its expiry expired and drops
// records past their keep time (redis expiry drops them too; deleting
// them here keeps the sweep's clock the one that counts). It answers the
// records it expired, four fields each (rec, by, at, note): each once,
// whichever replica sweeps.
var sweepScript = redis.NewScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local out = {}
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  local k = ARGV[2] .. id
  local st = redis.call('HGET', k, 'state')
  if st == 'pending' or st == 'approved' then
    redis.call('HSET', k, 'state', 'expired')
    redis.call('HDEL', k, 'held')
    local f = redis.call('HMGET', k, 'rec', 'by', 'at', 'note')
    for i = 1, 4 do table.insert(out, f[i] or '') end
  end
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', ARGV[1])) do
  redis.call('DEL', ARGV[2] .. id)
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
return out
`)

// Sweep implements Store.
func (s *Redis) Sweep(ctx context.Context) ([]*Record, error) {
	now := s.o.Now()
	res, err := sweepScript.Run(ctx, s.c, []string{s.live(), s.pending(), s.all()}, ms(now), s.prefix+"rec:").StringSlice()
	if err != nil {
		return nil, unavailableErr(err)
	}
	var out []*Record
	for i := 0; i+3 < len(res); i += 4 {
		r, err := fromHash("", map[string]string{"rec": res[i], "by": res[i+1], "at": res[i+2], "note": res[i+3]})
		if err != nil {
			continue
		}
		r.State = Expired
		out = append(out, r)
	}
	sortRecords(out)
	return out, nil
}

// Pending implements Store.
func (s *Redis) Pending(ctx context.Context) (int, error) {
	now := strconv.FormatInt(ms(s.o.Now()), 10)
	n, err := s.c.ZCount(ctx, s.pending(), "("+now, "+inf").Result()
	if err != nil {
		return 0, unavailableErr(err)
	}
	return int(n), nil
}
