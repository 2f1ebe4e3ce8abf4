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
	opts   Options
	client *redis.Client
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
	return &Redis{opts: o.withDefaults(), client: c, prefix: redisPrefix}, nil
}

// Ping checks that the server answers.
func (s *Redis) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return unavailableErr(err)
	}
	return nil
}

// Close implements Store.
func (s *Redis) Close() error { return s.client.Close() }

func (s *Redis) key(id string) string { return s.prefix + "rec:" + id }
func (s *Redis) live() string         { return s.prefix + "live" }
func (s *Redis) pending() string      { return s.prefix + "pending" }
func (s *Redis) all() string          { return s.prefix + "all" }

func unixMillis(t time.Time) int64 { return t.UnixMilli() }

// lateCheck opens every script that changes a record: a script the
// server runs after ARGV[1] (its deadline, unix ms) changes nothing and
// answers 'late'. A server paused past the client's timeout would
// otherwise apply a write the client already answered 503 for: an
// approval decided behind a "try again", a hold nobody has the id of.
const lateCheck = `
local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(ARGV[1]) then return {'late'} end
`

// writeBudget is how long after a script is sent the server may still
// apply it: half the client's timeout, leaving the other half for the
// answer's way back and for the clocks of replica and server to differ.
const writeBudget = redisTimeout / 2

// deadline is a script's ARGV[1], from the wall clock (never the store's
// Options.Now, which tests move), since the server compares it with its
// own.
func deadline() int64 { return time.Now().Add(writeBudget).UnixMilli() }

// errLate is a script the server reached after its deadline.
var errLate = errors.New("the store answered after the deadline; nothing was changed")

// putScript stores a new record and its index entries, unless late.
var putScript = redis.NewScript(lateCheck + `
redis.call('HSET', KEYS[1], 'rec', ARGV[2], 'state', ARGV[3], 'exp', ARGV[4])
if ARGV[7] == '1' then redis.call('HSET', KEYS[1], 'held', ARGV[8]) end
redis.call('PEXPIREAT', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
if ARGV[3] == 'pending' or ARGV[3] == 'approved' then redis.call('ZADD', KEYS[3], ARGV[4], ARGV[6]) end
if ARGV[3] == 'pending' then redis.call('ZADD', KEYS[4], ARGV[4], ARGV[6]) end
return {'ok'}
`)

// Put implements Store: the hash, its expiry and the index entries in one
// script, which applies whole or, past its deadline, not at all.
func (s *Redis) Put(ctx context.Context, r *Record) error {
	imm := clone(r, false)
	imm.State, imm.DecidedBy, imm.DecidedAt, imm.Note, imm.ReleasedAt = "", "", time.Time{}, "", time.Time{}
	b, err := json.Marshal(imm)
	if err != nil {
		return err
	}
	keep := r.ExpiresAt.Add(s.opts.Linger)
	hasHeld := "0"
	if r.Held != nil {
		hasHeld = "1"
	}
	res, err := putScript.Run(ctx, s.client, []string{s.key(r.ID), s.all(), s.live(), s.pending()},
		deadline(), b, string(r.State), unixMillis(r.ExpiresAt), unixMillis(keep), r.ID, hasHeld, r.Held).StringSlice()
	if err != nil {
		return unavailableErr(err)
	}
	if res[0] == "late" {
		return unavailableErr(errLate)
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
	h, err := s.client.HGetAll(ctx, s.key(id)).Result()
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
	return r.asOf(s.opts.Now()), nil
}

var listFields = []string{"rec", "state", "by", "at", "note", "rel"}

// List implements Store.
func (s *Redis) List(ctx context.Context, st State) ([]*Record, error) {
	now := s.opts.Now()
	ids, err := s.client.ZRangeByScore(ctx, s.all(), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(unixMillis(now), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, unavailableErr(err)
	}
	cmds, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
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
		if r.asOf(now); st == "" || r.State == st {
			out = append(out, r)
		}
	}
	sortRecords(out)
	return out, nil
}

// decideScript moves a pending, unexpired record to ARGV[3]. It answers
// {"ok", rec}, {refusal, state} or {"late"}.
var decideScript = redis.NewScript(lateCheck + `
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return {'unknown', ''} end
local now = tonumber(ARGV[2])
if (st == 'pending' or st == 'approved') and now >= tonumber(redis.call('HGET', KEYS[1], 'exp')) then
  return {'expired', st}
end
if st ~= 'pending' then return {'decided', st} end
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'by', ARGV[4], 'note', ARGV[5], 'at', ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[6])
if ARGV[3] == 'denied' then
  redis.call('HDEL', KEYS[1], 'held')
  redis.call('ZREM', KEYS[2], ARGV[6])
end
return {'ok', redis.call('HGET', KEYS[1], 'rec')}
`)

// Decide implements Store.
func (s *Redis) Decide(ctx context.Context, id string, d Decision) (*Record, error) {
	now := s.opts.Now()
	to := Denied
	if d.Approve {
		to = Approved
	}
	res, err := decideScript.Run(ctx, s.client, []string{s.key(id), s.live(), s.pending()},
		deadline(), unixMillis(now), string(to), d.By, d.Note, id).StringSlice()
	if err != nil {
		return nil, unavailableErr(err)
	}
	switch res[0] {
	case "late":
		return nil, unavailableErr(errLate)
	case "ok":
		r, err := fromHash(id, map[string]string{"rec": res[1]})
		if err != nil {
			return nil, err
		}
		r.State, r.DecidedBy, r.Note, r.DecidedAt = to, d.By, d.Note, time.UnixMilli(unixMillis(now)).UTC()
		return r, nil
	case "unknown":
		return nil, refuse(CodeUnknown, "")
	case "expired":
		return nil, refuse(CodeExpired, Expired)
	}
	return nil, refuse(CodeDecided, State(res[1]))
}

// claimScript releases an approved record, or a pending one when ARGV[4]
// is "1" (a caller approval whose secret was checked). It answers
// {"ok", held, by, at, note}, {refusal state} or {"late"}: a release the
// client gave up on would use the approval and lose its answer.
var claimScript = redis.NewScript(lateCheck + `
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return {'unknown'} end
local now = tonumber(ARGV[2])
if (st == 'pending' or st == 'approved') and now >= tonumber(redis.call('HGET', KEYS[1], 'exp')) then
  return {'expired'}
end
if st == 'approved' or (st == 'pending' and ARGV[4] == '1') then
  local f = redis.call('HMGET', KEYS[1], 'held', 'by', 'at', 'note')
  redis.call('HSET', KEYS[1], 'state', 'released', 'rel', ARGV[2])
  redis.call('HDEL', KEYS[1], 'held')
  redis.call('ZREM', KEYS[2], ARGV[3])
  redis.call('ZREM', KEYS[3], ARGV[3])
  return {'ok', f[1], f[2], f[3], f[4]}
end
return {st}
`)

// Claim implements Store. The request and the secret are checked against
// the record's fields that never change, in Go (the secret in constant
// time); the state is checked and moved by the script, atomically.
func (s *Redis) Claim(ctx context.Context, id string, m Match) (*Record, error) {
	rec, err := s.client.HGet(ctx, s.key(id), "rec").Result()
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
	now := s.opts.Now()
	res, err := claimScript.Run(ctx, s.client, []string{s.key(id), s.live(), s.pending()}, deadline(), unixMillis(now), id, caller).Slice()
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
	case "late":
		return nil, unavailableErr(errLate)
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
	now := s.opts.Now()
	res, err := sweepScript.Run(ctx, s.client, []string{s.live(), s.pending(), s.all()}, unixMillis(now), s.prefix+"rec:").StringSlice()
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
	now := strconv.FormatInt(unixMillis(s.opts.Now()), 10)
	n, err := s.client.ZCount(ctx, s.pending(), "("+now, "+inf").Result()
	if err != nil {
		return 0, unavailableErr(err)
	}
	return int(n), nil
}
