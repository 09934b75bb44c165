// Package bench compares holdfast's lease with four other ways of taking a
// lock on one Redis: a hand-written minimal lease (the baseline the design
// sets, "ideal"), go-redsync/redsync v4 over a single pool,
// bsm/redislock, and the ideal with holdfast's clock floor on the token
// ("ideal_floor"). cmd/leasebench runs the comparison; the Go benchmarks in
// this package run one contender at a time, for profiling.
//
// Every contender is driven through the same Worker interface, and no
// Worker allocates per operation on its own: the allocations counted per
// acquire+release are the library's.
package bench

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/lease"
)

// ErrNotHeld is returned by a Worker's Renew or Release when the lock is no
// longer held.
var ErrNotHeld = errors.New("bench: lock not held")

// Contender is one lock implementation under test.
type Contender interface {
	// Name is the contender's name in the output: holdfast, ideal,
	// redsync, redislock or ideal_floor.
	Name() string
	// Worker returns a handle on the lock called key. A Worker is used by
	// one goroutine at a time; several Workers may share a key.
	Worker(key string) Worker
}

// Worker takes, renews and frees one lock, one call (and for every
// contender here one or two Redis round trips) at a time.
type Worker interface {
	// Acquire makes one attempt, without retry. It reports false and no
	// error when another owner holds the lock.
	Acquire(ctx context.Context) (bool, error)
	// Renew extends the held lock by its TTL.
	Renew(ctx context.Context) error
	// Release frees the held lock.
	Release(ctx context.Context) error
}

// Names lists the contenders in their output order.
var Names = []string{"holdfast", "ideal", "redsync", "redislock", "ideal_floor"}

// New returns the five contenders, in the order of Names, over rdb. Each
// writes only keys that start with prefix + its name + ":" (see KeyPrefix),
// with leases of ttl.
func New(rdb redis.UniversalClient, prefix string, ttl time.Duration) ([]Contender, error) {
	hf, err := NewHoldfast(rdb, KeyPrefix(prefix, "holdfast"), ttl)
	if err != nil {
		return nil, err
	}
	return []Contender{
		hf,
		NewIdeal(rdb, KeyPrefix(prefix, "ideal"), ttl),
		NewRedsync(rdb, KeyPrefix(prefix, "redsync"), ttl),
		NewRedislock(rdb, KeyPrefix(prefix, "redislock"), ttl),
		NewIdealFloor(rdb, KeyPrefix(prefix, "ideal_floor"), ttl),
	}, nil
}

// KeyPrefix is the key prefix of contender name under the run prefix.
func KeyPrefix(prefix, name string) string { return prefix + name + ":" }

// ---- holdfast ------------------------------------------------------------

// Holdfast is lease.Client: TryAcquire, Lease.Renew, Lease.Release, with
// the client's keep-alive running as it does for users.
type Holdfast struct {
	c   *lease.Client
	ttl time.Duration
}

// NewHoldfast returns the holdfast contender; its keys are
// prefix{key} and prefix{key}:fence.
func NewHoldfast(rdb redis.UniversalClient, prefix string, ttl time.Duration) (*Holdfast, error) {
	c, err := lease.New(rdb, lease.Options{Prefix: prefix})
	if err != nil {
		return nil, err
	}
	return &Holdfast{c: c, ttl: ttl}, nil
}

// Name implements Contender.
func (*Holdfast) Name() string { return "holdfast" }

// Client returns the lease.Client under test.
func (h *Holdfast) Client() *lease.Client { return h.c }

// Worker implements Contender.
func (h *Holdfast) Worker(key string) Worker { return &holdfastWorker{h: h, name: key} }

type holdfastWorker struct {
	h    *Holdfast
	name string
	l    *lease.Lease
}

func (w *holdfastWorker) Acquire(ctx context.Context) (bool, error) {
	l, err := w.h.c.TryAcquire(ctx, w.name, w.h.ttl)
	if errors.Is(err, lease.ErrNotAcquired) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	w.l = l
	return true, nil
}

func (w *holdfastWorker) Renew(ctx context.Context) error { return w.l.Renew(ctx) }

func (w *holdfastWorker) Release(ctx context.Context) error {
	l := w.l
	w.l = nil
	return l.Release(ctx)
}

// ---- ideal ---------------------------------------------------------------

// The hand-written minimum: one script takes the key and issues a token,
// one compares and deletes, one compares and extends. No keep-alive, no
// trust window, no loss signal, no wake-up of waiters.
var (
	idealAcquire = redis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return 0`)
	idealRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	idealRenew   = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
)

// Ideal is the baseline: a fenced lease in one EVALSHA per call, written
// for speed (go-redis Script.Run, EVALSHA with EVAL fallback).
type Ideal struct {
	rdb    redis.UniversalClient
	prefix string
	ttlArg any // TTL in milliseconds, boxed once
}

// NewIdeal returns the baseline contender; its keys are prefix{key} and
// prefix{key}:fence, as holdfast's.
func NewIdeal(rdb redis.UniversalClient, prefix string, ttl time.Duration) *Ideal {
	return &Ideal{rdb: rdb, prefix: prefix, ttlArg: ttl.Milliseconds()}
}

// Name implements Contender.
func (*Ideal) Name() string { return "ideal" }

// Worker implements Contender.
func (c *Ideal) Worker(key string) Worker {
	k := c.prefix + "{" + key + "}"
	return &idealWorker{c: c, acquire: idealAcquire, keys: []string{k, k + ":fence"}}
}

// idealFloorAcquire is the ideal's acquire script with holdfast's clock
// floor on the token: max(last token + 1, server TIME in µs), written to
// the counter in one SET ... GET (see lease/redislease/scripts/acquire.lua). It costs
// the server the one TIME command more that holdfast's script pays.
var idealFloorAcquire = redis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local now = redis.call('TIME')
  local micros = now[1] .. string.format('%06d', tonumber(now[2]))
  local last = redis.call('SET', KEYS[2], micros, 'GET')
  if last and tonumber(last) >= tonumber(micros) then
    redis.call('SET', KEYS[2], last)
    return redis.call('INCR', KEYS[2])
  end
  return tonumber(micros)
end
return 0`)

// NewIdealFloor returns the "ideal_floor" contender: the ideal with a
// token that never goes below the server clock (idealFloorAcquire), the
// hand-written equal of holdfast's acquire script. Its keys are laid out
// as the ideal's.
func NewIdealFloor(rdb redis.UniversalClient, prefix string, ttl time.Duration) *IdealFloor {
	return &IdealFloor{Ideal{rdb: rdb, prefix: prefix, ttlArg: ttl.Milliseconds()}}
}

// IdealFloor is the ideal whose acquire script adds holdfast's TIME floor.
type IdealFloor struct{ Ideal }

// Name implements Contender.
func (*IdealFloor) Name() string { return "ideal_floor" }

// Worker implements Contender.
func (c *IdealFloor) Worker(key string) Worker {
	w := c.Ideal.Worker(key).(*idealWorker)
	w.acquire = idealFloorAcquire
	return w
}

type idealWorker struct {
	c       *Ideal
	acquire *redis.Script
	keys    []string // lease key, fence key
	owner   string
	token   int64
}

func (w *idealWorker) Acquire(ctx context.Context) (bool, error) {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return false, err
	}
	owner := hex.EncodeToString(b[:])
	token, err := w.acquire.Run(ctx, w.c.rdb, w.keys, owner, w.c.ttlArg).Int64()
	if err != nil || token == 0 {
		return false, err
	}
	w.owner, w.token = owner, token
	return true, nil
}

func (w *idealWorker) Renew(ctx context.Context) error {
	n, err := idealRenew.Run(ctx, w.c.rdb, w.keys[:1], w.owner, w.c.ttlArg).Int64()
	if err == nil && n != 1 {
		err = ErrNotHeld
	}
	return err
}

func (w *idealWorker) Release(ctx context.Context) error {
	n, err := idealRelease.Run(ctx, w.c.rdb, w.keys[:1], w.owner).Int64()
	if err == nil && n != 1 {
		err = ErrNotHeld
	}
	return err
}

// ---- redsync -------------------------------------------------------------

// Redsync is go-redsync/redsync v4 with one goredis/v9 pool (quorum 1):
// TryLockContext (one try), ExtendContext, UnlockContext. A Mutex is made
// once per Worker and reused, as redsync allows.
type Redsync struct {
	rs     *redsync.Redsync
	prefix string
	ttl    time.Duration
}

// NewRedsync returns the redsync contender; its key is prefix+key.
func NewRedsync(rdb redis.UniversalClient, prefix string, ttl time.Duration) *Redsync {
	return &Redsync{rs: redsync.New(goredis.NewPool(rdb)), prefix: prefix, ttl: ttl}
}

// Name implements Contender.
func (*Redsync) Name() string { return "redsync" }

// Worker implements Contender.
func (c *Redsync) Worker(key string) Worker {
	return &redsyncWorker{m: c.rs.NewMutex(c.prefix+key, redsync.WithExpiry(c.ttl), redsync.WithTries(1))}
}

type redsyncWorker struct{ m *redsync.Mutex }

func (w *redsyncWorker) Acquire(ctx context.Context) (bool, error) {
	err := w.m.TryLockContext(ctx)
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed) {
		return false, nil
	}
	return err == nil, err
}

func (w *redsyncWorker) Renew(ctx context.Context) error {
	ok, err := w.m.ExtendContext(ctx)
	if err == nil && !ok {
		err = ErrNotHeld
	}
	return err
}

func (w *redsyncWorker) Release(ctx context.Context) error {
	ok, err := w.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = ErrNotHeld
	}
	return err
}

// ---- redislock -----------------------------------------------------------

// Redislock is bsm/redislock: Obtain without retry (nil options), Refresh,
// Release.
type Redislock struct {
	c      *redislock.Client
	prefix string
	ttl    time.Duration
}

// NewRedislock returns the redislock contender; its key is prefix+key.
func NewRedislock(rdb redis.UniversalClient, prefix string, ttl time.Duration) *Redislock {
	return &Redislock{c: redislock.New(rdb), prefix: prefix, ttl: ttl}
}

// Name implements Contender.
func (*Redislock) Name() string { return "redislock" }

// Worker implements Contender.
func (c *Redislock) Worker(key string) Worker {
	return &redislockWorker{c: c, key: c.prefix + key}
}

type redislockWorker struct {
	c    *Redislock
	key  string
	lock *redislock.Lock
}

func (w *redislockWorker) Acquire(ctx context.Context) (bool, error) {
	l, err := w.c.c.Obtain(ctx, w.key, w.c.ttl, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	w.lock = l
	return true, nil
}

func (w *redislockWorker) Renew(ctx context.Context) error {
	return w.lock.Refresh(ctx, w.c.ttl, nil)
}

func (w *redislockWorker) Release(ctx context.Context) error {
	l := w.lock
	w.lock = nil
	return l.Release(ctx)
}

// ---- housekeeping --------------------------------------------------------

// DeleteKeys deletes every key that starts with prefix and returns how
// many it deleted. prefix must not hold glob characters.
func DeleteKeys(ctx context.Context, rdb redis.UniversalClient, prefix string) (int, error) {
	deleted := 0
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return deleted, fmt.Errorf("scan %s*: %w", prefix, err)
		}
		if len(keys) > 0 {
			n, err := rdb.Del(ctx, keys...).Result()
			if err != nil {
				return deleted, fmt.Errorf("del: %w", err)
			}
			deleted += int(n)
		}
		if next == 0 {
			return deleted, nil
		}
		cursor = next
	}
}

// ServerCPU returns the CPU time (user + system) the server rdb talks to
// has used since it started, from INFO cpu (used_cpu_user + used_cpu_sys).
func ServerCPU(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("info cpu: %w", err)
	}
	var total time.Duration
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("info cpu: %s: %w", k, err)
			}
			total += time.Duration(f * float64(time.Second))
		}
	}
	return total, nil
}
