package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A ledger layout's floor: the bare Redis commands of a slot's winner, its
// claim (the unit's reads, the lease's SET NX PX, TIME and SET ... GET,
// the begin's writes) and its finish (the reads, the record's writes, the
// release), with none of the scripts' logic (no rule, no plan, no losers),
// 256 units per script call, in a keyspace whose records grow slot by
// slot. It measures what a layout's commands and keys cost the server,
// not the ledger: the scheduler's Redis CPU per slot is judged against it
// (schedbench's ratio_vs_floor).
//
// Two layouts: "v1", the Redis ledger's layout until 2026-12-05 (a unit's
// fence, last slot, horizon, open and index zsets and one run hash per
// slot, each a key: the claim's 13 commands, the finish's 6), and "v2",
// stored format 1 as released (redisledger's scripts/fence.lua: the fence,
// last slot, horizon and hot run in one unit hash; the run hash and index
// entry written at the finish: 6 and 6, the claim's 7 until 2026-12-05,
// when an acquisition without a holder label stopped deleting the label
// key).

// v1Claim is the claim of a slot due on time under v1, KEYS 8 per unit
// (run hash, lease, lease counter, last, horizon, open, index, fence).
const v1Claim = `
local now = ARGV[1]
local slot = ARGV[2]
local o = 0
local out = {}
for i = 1, #KEYS, 8 do
  local run, lease, cnt, last, horizon, open, index, fence = KEYS[i], KEYS[i+1], KEYS[i+2], KEYS[i+3], KEYS[i+4], KEYS[i+5], KEYS[i+6], KEYS[i+7]
  local owner = 'owner-' .. i
  redis.call('HMGET', run, 'status', 'attempt', 'base', 'owner')
  redis.call('SET', lease, owner, 'NX', 'PX', 10000)
  local t = redis.call('TIME')
  local tok = t[1] .. t[2]
  redis.call('SET', cnt, tok, 'GET')
  local l = redis.call('GET', last)
  if not l then redis.call('SET', horizon, now, 'NX') end
  redis.call('EXISTS', open, run .. ':p', run .. ':r')
  redis.call('HMGET', fence, 'token', 'owner')
  redis.call('HSET', fence, 'token', tok, 'owner', owner)
  redis.call('HSET', run, 'status', 'running', 'attempt', 1, 'base', 0, 'owner', owner, 'token', tok, 'heartbeat', now,
    'a1.owner', owner, 'a1.token', tok, 'a1.status', 'running', 'a1.started', now, 'a1.hb', now)
  redis.call('ZADD', open, slot, slot)
  redis.call('ZADD', index, slot, slot)
  redis.call('SET', last, slot)
  o = o + 1
  out[o] = tok
end
return out`

// v1Finish is the finish and release under v1, the same KEYS.
const v1Finish = `
local now = ARGV[1]
local slot = ARGV[2]
for i = 1, #KEYS, 8 do
  local run, lease, cnt, last, horizon, open, index, fence = KEYS[i], KEYS[i+1], KEYS[i+2], KEYS[i+3], KEYS[i+4], KEYS[i+5], KEYS[i+6], KEYS[i+7]
  local owner = 'owner-' .. i
  redis.call('HMGET', fence, 'token', 'owner')
  redis.call('HMGET', run, 'status', 'owner', 'attempt')
  redis.call('HSET', run, 'status', 'succeeded', 'retry_at', '', 'a1.status', 'succeeded', 'a1.class', '', 'a1.error', '', 'a1.finished', now)
  redis.call('ZREM', open, slot)
  if redis.call('GET', lease) == owner then redis.call('DEL', lease, lease .. ':w') end
end
return 1`

// v2Claim is the claim under v2 (claimall.lua's commands for a winner of
// a fresh slot: the unit read, the EXISTS of open, pending, retry and the
// pause flag, the lease's acquisition, the hot run's HSET; no holder
// label, as a scheduler without Options.Holder writes none since
// 2026-12-05),
// KEYS 8 per unit: unit hash, lease, lease counter, run hash, index,
// open, pending, retry (the last four as the claim's arguments; the pause
// flag is the job's).
const v2Claim = `
local now = ARGV[1]
local slot = ARGV[2]
local o = 0
local out = {}
for i = 1, #KEYS, 8 do
  local unit, lease, cnt, open, pending, retry = KEYS[i], KEYS[i+1], KEYS[i+2], KEYS[i+5], KEYS[i+6], KEYS[i+7]
  local owner = 'owner-' .. i
  local u = redis.call('HMGET', unit, 'token', 'owner', 'last', 'horizon', 'hot', 'hot.owner')
  redis.call('EXISTS', open, pending, retry, unit .. ':paused')
  redis.call('SET', lease, owner, 'NX', 'PX', 10000)
  local t = redis.call('TIME')
  local tok = t[1] .. t[2]
  redis.call('SET', cnt, tok, 'GET')
  local f = {'token', tok, 'owner', owner, 'last', slot, 'hot', slot, 'hot.owner', owner,
    'hot.token', tok, 'hot.started', now, 'hot.hb', now, 'hot.holder', 'replica'}
  if not u[4] then f[#f + 1], f[#f + 2] = 'horizon', now end
  redis.call('HSET', unit, unpack(f))
  o = o + 1
  out[o] = tok
end
return out`

// v2Finish is finishall.lua's commands for the end of a hot run that
// succeeded, and the release: the same KEYS.
const v2Finish = `
local now = ARGV[1]
local slot = ARGV[2]
for i = 1, #KEYS, 8 do
  local unit, lease, run, index = KEYS[i], KEYS[i+1], KEYS[i+3], KEYS[i+4]
  local owner = 'owner-' .. i
  local h = redis.call('HMGET', unit, 'hot', 'hot.owner', 'hot.token', 'hot.started', 'hot.hb', 'hot.holder', 'token', 'owner')
  redis.call('HSET', run, 'status', 'succeeded', 'attempt', 1, 'base', 0, 'owner', owner, 'retry_at', '',
    'a1.owner', owner, 'a1.token', h[3], 'a1.status', 'succeeded', 'a1.class', '', 'a1.error', '',
    'a1.started', h[4], 'a1.hb', h[5], 'a1.finished', now, 'a1.holder', h[6])
  redis.call('HDEL', unit, 'hot')
  redis.call('ZADD', index, slot, slot)
  if redis.call('GET', lease) == owner then redis.call('DEL', lease, lease .. ':w') end
end
return 1`

// FloorSlot is the server CPU a layout's bare commands took per unit for
// one slot.
type FloorSlot struct {
	Claim, Finish time.Duration // per unit
	Keys          int64         // the keyspace's size after the slot
}

// Total is the claim and the finish.
func (f FloorSlot) Total() time.Duration { return f.Claim + f.Finish }

// LayoutFloor runs layout's ("v1" or "v2") bare commands for slots slots
// of units units, one minute apart, on rdb, under prefix, and returns each
// slot's server CPU per unit (INFO cpu: rdb must be a server nothing else
// uses meanwhile). The keys are left for the caller to delete.
func LayoutFloor(ctx context.Context, rdb redis.UniversalClient, prefix, layout string, units, slots int) ([]FloorSlot, error) {
	f, err := NewFloor(rdb, prefix, layout, units)
	if err != nil {
		return nil, err
	}
	var out []FloorSlot
	for range slots {
		s, err := f.Slot(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Floor is LayoutFloor one slot at a time, so that a caller can measure
// each slot of the floor right beside the slot it is the floor of
// (schedbench: on the scheduler's own server, in the seconds before and
// after each of its slots).
type Floor struct {
	rdb           redis.UniversalClient
	prefix        string
	layout        string
	units         int
	claim, finish *redis.Script
	base          int64 // the first slot's instant, Unix seconds
	next          int   // the next slot's index
}

// NewFloor returns the Floor of layout ("v1" or "v2") for units units on
// rdb, under prefix; its first slot is now, the next ones a minute apart.
func NewFloor(rdb redis.UniversalClient, prefix, layout string, units int) (*Floor, error) {
	f := &Floor{rdb: rdb, prefix: prefix, layout: layout, units: units, base: time.Now().Unix()}
	switch layout {
	case "v1":
		f.claim, f.finish = redis.NewScript(v1Claim), redis.NewScript(v1Finish)
	case "v2":
		f.claim, f.finish = redis.NewScript(v2Claim), redis.NewScript(v2Finish)
	default:
		return nil, fmt.Errorf("layout %q: want v1 or v2", layout)
	}
	return f, nil
}

// Slot runs the next slot's bare commands and returns its server CPU per
// unit (INFO cpu before and after each script call: nothing else may use
// the server meanwhile). The keys are left for the caller to delete.
func (f *Floor) Slot(ctx context.Context) (FloorSlot, error) {
	slot := strconv.FormatInt(f.base+int64(f.next*60), 10)
	f.next++
	var cl, fi time.Duration
	for b := 0; b < f.units; b += 256 {
		var keys []string
		for u := b; u < min(b+256, f.units); u++ {
			tag := fmt.Sprintf("{job%03d|p%03d}", u/100, u%100)
			lk, lg := f.prefix+"lease:"+tag, f.prefix+"ledger:"+tag
			if f.layout == "v1" {
				keys = append(keys, lg+":run:"+slot, lk, lk+":fence", lg+":last", lg+":horizon", lg+":open", lg+":index", lg+":fence")
			} else {
				keys = append(keys, lg+":unit", lk, lk+":fence", lg+":run:"+slot, lg+":index", lg+":open", lg+":pending", lg+":retry")
			}
		}
		x0, err := ServerCPU(ctx, f.rdb)
		if err != nil {
			return FloorSlot{}, err
		}
		if err := f.claim.Run(ctx, f.rdb, keys, "1700000000000", slot).Err(); err != nil {
			return FloorSlot{}, err
		}
		x1, err := ServerCPU(ctx, f.rdb)
		if err != nil {
			return FloorSlot{}, err
		}
		if err := f.finish.Run(ctx, f.rdb, keys, "1700000000000", slot).Err(); err != nil {
			return FloorSlot{}, err
		}
		x2, err := ServerCPU(ctx, f.rdb)
		if err != nil {
			return FloorSlot{}, err
		}
		cl += x1 - x0
		fi += x2 - x1
	}
	n := time.Duration(f.units)
	return FloorSlot{Claim: cl / n, Finish: fi / n, Keys: f.rdb.DBSize(ctx).Val()}, nil
}
