// Command layoutprobe compares the Redis CPU of a slot's bare commands
// under two layouts of the Redis ledger, in a keyspace of -units units
// (10,000) whose records grow slot by slot: v1, the stored format of
// redisledger today (a unit's fence, last slot, horizon, open and index
// zsets and one run hash per slot, each a key: the claim's 13 commands,
// the finish's 6), and v2, a candidate layout for issue 14's scheduler
// target (the fence, last slot, horizon and running slot in one hash per
// unit, the run hash written at the finish: 5 and 6 commands). Both take
// and release the unit's lease and issue its token as the lease scripts
// do. Each slot is claimed and finished by one owner, 256 units per
// script call, with none of the scripts' logic (no rule, no plan, no
// losers): it measures what the commands and keys of a layout cost, not
// the ledger. It prints, per layout and slot,
//
//	probe: <layout> slot <n> claim_us_per_unit=<x> finish_us_per_unit=<x> total_us_per_unit=<x> keys=<n>
//
// from the server's used_cpu (INFO cpu). It runs FLUSHALL before each
// layout: point it (-redis) at a redis-server nothing else uses, as
// redis-server --port 6390 --save ” started by hand. Run it from bench/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/bench"
)

// v1claim is the claim of a slot due on time, for the units of KEYS (8 each:
// run hash, lease, lease counter, last, horizon, open, index, fence), as
// claimall.lua makes it for a winner: run read, lease, token, begin.
const v1claim = `
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

// v1finish is finishrelease.lua's commands for the same keys.
const v1finish = `
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

// v2claim is the claim under v2, KEYS 5 per unit: unit hash, lease, lease
// counter, run hash, index.
const v2claim = `
local now = ARGV[1]
local slot = ARGV[2]
local o = 0
local out = {}
for i = 1, #KEYS, 5 do
  local unit, lease, cnt = KEYS[i], KEYS[i+1], KEYS[i+2]
  local owner = 'owner-' .. i
  local u = redis.call('HMGET', unit, 'ftok', 'fown', 'last', 'horizon', 'rslot', 'rstatus', 'rowner', 'waiting')
  redis.call('SET', lease, owner, 'NX', 'PX', 10000)
  local t = redis.call('TIME')
  local tok = t[1] .. t[2]
  redis.call('SET', cnt, tok, 'GET')
  if u[4] then
    redis.call('HSET', unit, 'ftok', tok, 'fown', owner, 'last', slot, 'rslot', slot, 'rattempt', 1, 'rowner', owner, 'rstatus', 'running', 'rstarted', now, 'rhb', now)
  else
    redis.call('HSET', unit, 'ftok', tok, 'fown', owner, 'last', slot, 'horizon', now, 'rslot', slot, 'rattempt', 1, 'rowner', owner, 'rstatus', 'running', 'rstarted', now, 'rhb', now)
  end
  o = o + 1
  out[o] = tok
end
return out`

// v2finish records the run (its hash and index entry), clears the unit's
// running slot and releases the lease.
const v2finish = `
local now = ARGV[1]
local slot = ARGV[2]
for i = 1, #KEYS, 5 do
  local unit, lease, cnt, run, index = KEYS[i], KEYS[i+1], KEYS[i+2], KEYS[i+3], KEYS[i+4]
  local owner = 'owner-' .. i
  local u = redis.call('HMGET', unit, 'ftok', 'fown', 'rslot', 'rattempt', 'rowner', 'rstarted', 'rhb')
  redis.call('HSET', unit, 'rstatus', 'succeeded', 'rslot', '')
  redis.call('HSET', run, 'status', 'succeeded', 'attempt', 1, 'a1.owner', owner, 'a1.token', u[1] or '0', 'a1.status', 'succeeded', 'a1.started', now, 'a1.hb', now, 'a1.finished', now)
  redis.call('ZADD', index, slot, slot)
  if redis.call('GET', lease) == owner then redis.call('DEL', lease, lease .. ':w') end
end
return 1`

func main() {
	url := flag.String("redis", "redis://127.0.0.1:6390/0", "Redis URL of a server nothing else uses (FLUSHALL runs on it)")
	units := flag.Int("units", 10000, "units (job, partition) per slot")
	slots := flag.Int("slots", 3, "slots per layout")
	rounds := flag.Int("rounds", 2, "runs of each layout, alternating")
	flag.Parse()
	if err := run(*url, *units, *slots, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "layoutprobe:", err)
		os.Exit(1)
	}
}

func run(url string, units, slots, rounds int) error {
	if units < 1 || slots < 1 || rounds < 1 {
		return errors.New("-units, -slots and -rounds must be positive")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	ctx := context.Background()
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	const prefix = "holdfast:ledger:"
	for r := range 2 * rounds {
		layout := []string{"v1", "v2"}[r%2]
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			return err
		}
		claim, finish := redis.NewScript(v1claim), redis.NewScript(v1finish)
		if layout == "v2" {
			claim, finish = redis.NewScript(v2claim), redis.NewScript(v2finish)
		}
		base := time.Now().Unix()
		for s := range slots {
			slot := strconv.FormatInt(base+int64(s*60), 10)
			var cl, fi time.Duration
			for b := 0; b < units; b += 256 {
				var keys []string
				for u := b; u < min(b+256, units); u++ {
					tag := fmt.Sprintf("{job%03d|p%03d}", u/100, u%100)
					lk := "holdfast:lease:" + tag
					if layout == "v1" {
						keys = append(keys, prefix+tag+":run:"+slot, lk, lk+":fence", prefix+tag+":last",
							prefix+tag+":horizon", prefix+tag+":open", prefix+tag+":index", prefix+tag+":fence")
					} else {
						keys = append(keys, prefix+tag+":unit", lk, lk+":fence", prefix+tag+":run:"+slot, prefix+tag+":index")
					}
				}
				x0, err := bench.ServerCPU(ctx, rdb)
				if err != nil {
					return err
				}
				if err := claim.Run(ctx, rdb, keys, "1700000000000", slot).Err(); err != nil {
					return err
				}
				x1, err := bench.ServerCPU(ctx, rdb)
				if err != nil {
					return err
				}
				if err := finish.Run(ctx, rdb, keys, "1700000000000", slot).Err(); err != nil {
					return err
				}
				x2, err := bench.ServerCPU(ctx, rdb)
				if err != nil {
					return err
				}
				cl += x1 - x0
				fi += x2 - x1
			}
			n := float64(units)
			fmt.Printf("probe: %s slot %d claim_us_per_unit=%.1f finish_us_per_unit=%.1f total_us_per_unit=%.1f keys=%d\n",
				layout, s+1, cl.Seconds()*1e6/n, fi.Seconds()*1e6/n, (cl+fi).Seconds()*1e6/n, rdb.DBSize(ctx).Val())
		}
	}
	return nil
}
