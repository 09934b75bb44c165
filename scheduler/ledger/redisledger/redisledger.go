package redisledger

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/autopipe"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/fencerule"
	"github.com/holdfast-go/holdfast/internal/formatver"
	"github.com/holdfast-go/holdfast/internal/leaselua"
	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/redispolicy"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// DefaultPrefix starts every key of a Ledger ("holdfast:ledger:").
const DefaultPrefix = "holdfast:ledger:"

// Options configure a Ledger. The zero value is valid.
type Options struct {
	// Prefix starts every key of the Ledger; give each application its
	// own. It must not hold '{' or '}' (the hash tags are the Ledger's).
	// Default DefaultPrefix ("holdfast:ledger:").
	Prefix string
	// Eviction: the zero value reads maxmemory-policy (CONFIG GET, before
	// the first write and again a minute after each read that passed)
	// and refuses a Redis that may evict keys
	// (ErrEvictionPolicy) or refuses CONFIG GET (ErrEvictionPolicyUnknown):
	// an evicted record or fence loses a slot's history, and can let a
	// succeeded slot run again. See redislease.Eviction for declaring the
	// policy (managed Redis) or running anyway.
	Eviction Eviction
}

// Eviction configures the eviction-policy check; it is redislease.Eviction.
type Eviction = redispolicy.Options

// ErrInvalidOptions is returned by New for a nil client or a bad prefix.
var ErrInvalidOptions = fmt.Errorf("redisledger: %w", errfamily.ErrInvalidOptions)

// Errors of the eviction-policy check and of a full Redis, the same values
// as lease's (redislease.ErrEvictionPolicy, ...).
var (
	// ErrEvictionPolicy is returned by the first writes on a Redis that
	// may evict keys, without Eviction.AllowEviction.
	ErrEvictionPolicy = redispolicy.ErrEvictionPolicy
	// ErrEvictionPolicyUnknown is returned by the first writes on a Redis
	// that refuses CONFIG GET, when Eviction.Policy declares nothing.
	ErrEvictionPolicyUnknown = redispolicy.ErrPolicyUnknown
	// ErrRedisMemoryFull matches a write Redis refused with OOM.
	ErrRedisMemoryFull = redispolicy.ErrMemoryFull
)

var (
	//go:embed scripts/fence.lua
	fencePrelude string
	//go:embed scripts/begin.lua
	beginSrc string
	//go:embed scripts/heartbeat.lua
	heartbeatSrc string
	//go:embed scripts/finish.lua
	finishSrc string
	//go:embed scripts/finishmain.lua
	finishMain string
	//go:embed scripts/finishrelease.lua
	finishReleaseMain string
	//go:embed scripts/finishall.lua
	finishAllMain string
	//go:embed scripts/skip.lua
	skipSrc string
	//go:embed scripts/request.lua
	requestSrc string
	//go:embed scripts/cancel.lua
	cancelSrc string

	//go:embed scripts/clear.lua
	clearSrc string
	//go:embed scripts/claim.lua
	claimSrc string
	//go:embed scripts/claimall.lua
	claimAllMain string
	//go:embed scripts/beginmain.lua
	beginMain string

	// The fenced scripts start with the shared rule (fencerule.Lua), then
	// the ledger's prelude (raise, mark).
	beginScript     = luascript.New(fencerule.Lua, fencePrelude, beginSrc, beginMain)
	claimScript     = luascript.New(fencerule.Lua, fencePrelude, beginSrc, clearSrc, claimSrc)
	heartbeatScript = luascript.New(fencerule.Lua, fencePrelude, heartbeatSrc)
	finishScript    = luascript.New(fencerule.Lua, fencePrelude, finishSrc, finishMain)
	// The joined scripts also carry the lease's transitions.
	claimAllScript      = luascript.New(fencerule.Lua, fencePrelude, beginSrc, clearSrc, leaselua.Lua, claimAllMain)
	finishReleaseScript = luascript.New(fencerule.Lua, fencePrelude, finishSrc, leaselua.Release, finishReleaseMain)
	finishAllScript     = luascript.New(fencerule.Lua, fencePrelude, finishSrc, leaselua.Release, finishAllMain)
	skipScript          = luascript.New(fencerule.Lua, fencePrelude, skipSrc)
	requestScript       = luascript.New(requestSrc)
	cancelScript        = luascript.New(cancelSrc)
)

// Ledger is the default ledger.Ledger. The records of one (job, partition)
// share one hash tag, the name of the pair's lease (ledger.UnitScope:
// {job|partition}, {job} for the "" partition), so it works on Redis
// Cluster, and a script may join a lease's transitions to the ledger's
// (ClaimAll, FinishRelease); every fenced transition is one Lua script
// that checks and raises the fence.
//
// Keys under <prefix>{<UnitScope>}: unit (hash: token and owner, the fence
// of the unit scope, ledger.UnitScope; last, the latest slot begun or
// skipped, unix s; horizon, unix ms, set on first use; hot and hot.*, the
// hot run, see the package doc); fence:<unix> (hash: token, owner, the
// fence of the slot scope, ledger.SlotScope), run:<unix>
// (hash per slot: status, attempt, base, owner, retry_at, reason, and
// a<n>.* per attempt; a hot run has none until it ends), open, pending,
// retry and index (sorted sets of slots), pruned (Prune's cutoff), cancel
// (a cancel request). <prefix>{job}:paused holds the pause flag;
// <prefix>claimed:{<unix>}:<hash> are ClaimAll's claim markers (string
// "1", with a TTL).
type Ledger struct {
	rdb     redis.UniversalClient
	pipe    *autopipe.Pipe // fenced transitions of concurrent claims share round trips
	policy  *redispolicy.Checker
	prefix  string
	cluster bool // BeginIfClear's script spans two hash tags: not on Cluster
	// fin joins the FinishRelease calls of runs that end together into
	// one script call (finishall.lua): off on Cluster.
	fin autopipe.Joiner[*finishCall]
	// format is the stored format, checked on first use (checkFormat).
	format formatver.Gate
	loaded atomic.Bool // CheckPolicy loaded the scripts
}

// store names the package in format markers and errors.
const store = "scheduler/ledger/redisledger"

var (
	_ ledger.Ledger        = (*Ledger)(nil)
	_ ledger.ClearBeginner = (*Ledger)(nil)
	_ ledger.StatesReader  = (*Ledger)(nil)
	_ ledger.LeaseJoiner   = (*Ledger)(nil)
)

// New returns a ledger over rdb with keys under opts.Prefix (default
// DefaultPrefix). It returns an error matching ErrInvalidOptions for a nil
// rdb (a typed nil *redis.Client too), a Prefix holding '{' or '}' or an
// Eviction.Policy that is not a Redis policy. It sends nothing: the
// eviction policy is read before the first write (Begin, BeginIfClear,
// ClaimAll, Skip, Request, SetPaused).
func New(rdb redis.UniversalClient, opts Options) (*Ledger, error) {
	prefix := opts.Prefix
	if safe.IsNil(rdb) {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidOptions)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("%w: ledger prefix %q holds '{' or '}'", ErrInvalidOptions, prefix)
	}
	if err := opts.Eviction.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	_, cluster := rdb.(*redis.ClusterClient)
	l := &Ledger{rdb: rdb, pipe: autopipe.NewQueued(rdb, autopipe.QueuedInFlight), prefix: prefix, cluster: cluster,
		policy: redispolicy.New(rdb, opts.Eviction, "redisledger.Options.Eviction")}
	l.fin = autopipe.Joiner[*finishCall]{One: l.finishOne, Many: l.finishMany, Fail: (*finishCall).fail}
	l.fin.SetInFlight(finishInFlight)
	return l, nil
}

// CheckPolicy reads the Redis's maxmemory-policy unless done before (see
// Options.Eviction): nil when it keeps every key or eviction is allowed, an
// error matching ErrEvictionPolicy or ErrEvictionPolicyUnknown when
// refused, or the read's I/O error. Every write calls it first;
// scheduler.Start calls it before it claims anything, to fail at once.
// Once it passed, it also loads the ledger's scripts into the server
// (SCRIPT LOAD, on every master of a Cluster; once per Ledger, best
// effort), so that the first slot's claims and finishes find them
// compiled rather than each replica's first call compiling them in the
// slot's time (about 5 ms per script on a 2-core host).
func (l *Ledger) CheckPolicy(ctx context.Context) error {
	if err := l.checkPolicy(ctx); err != nil {
		return err
	}
	if !l.loaded.Load() {
		ok := true
		for _, s := range allScripts {
			if err := l.rdb.ScriptLoad(ctx, s.Source()).Err(); err != nil {
				ok = false
				break
			}
		}
		l.loaded.Store(ok)
	}
	return nil
}

// allScripts are the scripts CheckPolicy loads.
var allScripts = []*luascript.Script{beginScript, claimScript, heartbeatScript, finishScript,
	claimAllScript, finishReleaseScript, finishAllScript, skipScript, requestScript, cancelScript}

// checkPolicy reads the eviction policy unless done before, then checks
// the stored format (checkFormat).
func (l *Ledger) checkPolicy(ctx context.Context) error {
	if err := l.policy.Check(ctx); err != nil {
		return fmt.Errorf("redisledger: %w", err)
	}
	return l.checkFormat(ctx)
}

// checkFormatRead is checkFormat for the calls that only read or delete
// (Get, List, Paused, Prune, PrunePreview: what an operator's tools call):
// it writes no marker where none is, so one aimed at another store's
// prefix (holdfast ledger prune --ledger-prefix <the leases'>) leaves no
// ledger marker there for that store to refuse.
func (l *Ledger) checkFormatRead(ctx context.Context) error {
	if l.format.Passed() {
		return nil
	}
	return formatver.RedisRead(ctx, l.rdb, store, l.prefix)
}

// checkFormat checks the stored format unless done before: the marker key
// Prefix + "format" must hold "holdfast scheduler/ledger/redisledger format
// 1" (written there when missing), or every call fails with a
// *fence.FormatError (fence.ErrUnknownFormat): a newer build's format, or
// another store's keys under this prefix (docs/compatibility.md). Every
// method that reads or writes the ledger's keys calls it (writes through
// checkPolicy).
func (l *Ledger) checkFormat(ctx context.Context) error {
	if l.format.Passed() {
		return nil
	}
	return l.format.Check(ctx, func(ctx context.Context) error {
		return formatver.Redis(ctx, l.rdb, store, l.prefix)
	})
}

type ledgerKeys struct {
	// unit is the unit hash: the unit scope's fence (token, owner), the
	// last slot begun or skipped (last, unix s), the horizon (horizon,
	// unix ms) and the hot run (hot, hot.*: see scripts/fence.lua).
	unit                        string
	open, pending, retry, index string
	// pruned is a zset of one member, "cutoff", scored with the latest
	// cutoff of Prune (unix s; ZADD GT keeps the latest): State.Pruned.
	pruned string
	base   string
}

func (l *Ledger) keys(job, partition string) ledgerKeys {
	// The hash tag is the unit lease's name, so that a joined script
	// (ClaimAll, FinishRelease) finds the lease's keys in the same Cluster
	// slot.
	return keysAt(l.keyBase(job, partition))
}

// keyBase is keys(job, partition).base alone:
// "<prefix>{<ledger.UnitScope(job, partition)>}:".
func (l *Ledger) keyBase(job, partition string) string {
	return l.prefix + "{" + ledger.UnitScope(job, partition) + "}:"
}

// keysAt is the keys of the pair whose keys start with b,
// "<prefix>{<ledger.UnitScope(job, partition)>}:".
func keysAt(b string) ledgerKeys {
	return ledgerKeys{
		unit: b + "unit", open: b + "open", pending: b + "pending", retry: b + "retry",
		index: b + "index", pruned: b + "pruned", base: b,
	}
}

func (k ledgerKeys) run(at time.Time) string { return k.base + "run:" + unix(at) }

// fenceOf is the key of f's scope's fence (ledger.Fence.Check): the unit
// hash for the unit scope, the slot's own fence hash (fence:<unix>) for
// its slot scope.
func (k ledgerKeys) fenceOf(s ledger.Slot, f ledger.Fence) (string, error) {
	slotScoped, err := checkFence(s, f)
	switch {
	case err != nil:
		return "", err
	case slotScoped:
		return k.base + "fence:" + unix(s.At), nil
	}
	return k.unit, nil
}

// checkFence is f.Check, and refuses token 0 (fence.None) in f and its
// Planner with fence.ErrNoToken: the rule (fencerule.Lua) leaves that to
// its callers.
func checkFence(s ledger.Slot, f ledger.Fence) (slotScoped bool, err error) {
	if f.Token == fence.None || (f.Planner != nil && f.Planner.Token == fence.None) {
		return false, fence.ErrNoToken
	}
	return f.Check(s)
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// ceilUnix is t in unix seconds rounded up: the index's scores are whole
// seconds, so from <= slot iff ceilUnix(from) <= slot, and slot < to iff
// slot < ceilUnix(to), also for bounds within a second.
func ceilUnix(t time.Time) string {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return strconv.FormatInt(s, 10)
}

// seenArg is BeginRequest.Seen for clear.lua: unix seconds, "0" for none.
func seenArg(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return unix(t)
}
func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
func fromUnix(s string) time.Time {
	v, _ := strconv.ParseInt(s, 10, 64)
	return time.Unix(v, 0).UTC()
}
func fromMillis(s string) time.Time {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// State implements Ledger. One pipeline: one round trip on a single server.
func (l *Ledger) State(ctx context.Context, job, partition string, since, now time.Time) (ledger.State, error) {
	if ctx == nil {
		return ledger.State{}, nilContext("State")
	}
	sts, err := l.States(ctx, []ledger.StateRequest{{Job: job, Partition: partition, Since: since}}, now)
	if err != nil {
		return ledger.State{}, err
	}
	return sts[0], nil
}

// States implements ledger.StatesReader: the commands of every request's
// State in one pipeline (on a Cluster, go-redis sends one per node).
func (l *Ledger) States(ctx context.Context, reqs []ledger.StateRequest, now time.Time) ([]ledger.State, error) {
	if ctx == nil {
		return nil, nilContext("States")
	}
	if err := l.checkFormat(ctx); err != nil {
		return nil, err
	}
	type reads struct {
		open, pending *redis.StringSliceCmd
		retry         *redis.ZSliceCmd
		unit          *redis.SliceCmd // last, horizon, hot
		paused        *redis.IntCmd
		pruned        *redis.FloatCmd
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	pipe := l.rdb.Pipeline()
	rs := make([]reads, len(reqs))
	for i, q := range reqs {
		k := l.keys(q.Job, q.Partition)
		rs[i] = reads{
			open:    pipe.ZRange(ctx, k.open, 0, -1), // those before Since count when running (below)
			pending: pipe.ZRange(ctx, k.pending, 0, -1),
			retry:   pipe.ZRangeWithScores(ctx, k.retry, 0, -1),
		}
		pipe.HSetNX(ctx, k.unit, "horizon", millis(now))
		rs[i].unit = pipe.HMGet(ctx, k.unit, "last", "horizon", "hot")
		rs[i].paused = pipe.Exists(ctx, l.pausedKey(q.Job))
		rs[i].pruned = pipe.ZScore(ctx, k.pruned, prunedMember)
	}
	// Exec answers the first command's error only, and redis.Nil (a
	// ZSCORE of a pair never pruned) is no error: a later command's
	// failure (on a Cluster, a node that cannot be reached) must not pass
	// for an empty State, so every command's error is looked at.
	cmds, err := pipe.Exec(ctx)
	for _, c := range cmds {
		if err == nil || errors.Is(err, redis.Nil) {
			err = c.Err()
		}
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		if len(reqs) > 1 {
			return nil, fmt.Errorf("redisledger: state of %d pairs: %w", len(reqs), err)
		}
		return nil, fmt.Errorf("redisledger: state %s: %w", reqs[0].Job, err)
	}
	out := make([]ledger.State, len(reqs))
	opens := make([][]string, len(reqs))
	retries := make([]map[string]time.Time, len(reqs))
	var old []oldOpen
	for i, r := range rs {
		retryAt := map[string]time.Time{}
		for _, z := range r.retry.Val() {
			retryAt[fmt.Sprint(z.Member)] = time.UnixMilli(int64(z.Score)).UTC()
		}
		retries[i] = retryAt
		open := r.pending.Val()
		since := reqs[i].Since.Unix()
		for _, m := range r.open.Val() {
			_, retried := retryAt[m]
			switch {
			case fromUnix(m).Unix() >= since:
				open = append(open, m)
			case !retried:
				// Open before the window without a retry to come: running,
				// abandoned by a holder that lost the lease, unless its
				// record says otherwise (read below).
				old = append(old, oldOpen{i, m})
			}
		}
		for m, at := range retryAt {
			if !at.Before(reqs[i].Since) {
				open = append(open, m) // a retry due within the window, whatever the slot's age
			}
		}
		if hot := str(r.unit.Val()[2]); hot != "" {
			open = append(open, hot) // the hot run (scripts/fence.lua), running whatever its age
		}
		opens[i] = open
	}
	if err := l.running(ctx, reqs, old, opens); err != nil {
		return nil, err
	}
	for i, r := range rs {
		open, retryAt := opens[i], retries[i]
		seen := map[string]bool{}
		st := &out[i]
		u := r.unit.Val()
		for _, m := range open {
			if seen[m] {
				continue
			}
			seen[m] = true
			st.Open = append(st.Open, ledger.OpenSlot{At: fromUnix(m), RetryAt: retryAt[m]})
		}
		sort.Slice(st.Open, func(i, j int) bool { return st.Open[i].At.Before(st.Open[j].At) })
		if last := str(u[0]); last != "" {
			st.Last = fromUnix(last)
		}
		st.Horizon = fromMillis(str(u[1]))
		st.Paused = r.paused.Val() == 1
		if r.pruned.Err() == nil {
			st.Pruned = time.Unix(int64(r.pruned.Val()), 0).UTC()
		}
	}
	return out, nil
}

// oldOpen is a member of a pair's open zset before its State's Since
// without a retry entry: running, unless its record says otherwise.
type oldOpen struct {
	req  int    // the pair's index in States' requests
	slot string // the member: the slot in unix seconds
}

// running adds to opens (per request) the slots of old whose run hash
// says running, in one pipeline (none when old is empty): a slot a holder
// left running when it crashed is open whatever its age (ledger.State).
func (l *Ledger) running(ctx context.Context, reqs []ledger.StateRequest, old []oldOpen, opens [][]string) error {
	if len(old) == 0 {
		return nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(old))
	for j, o := range old {
		q := reqs[o.req]
		cmds[j] = pipe.HGet(ctx, l.keys(q.Job, q.Partition).run(fromUnix(o.slot)), "status")
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at: redis.Nil (no record) is none
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("redisledger: state of %d pairs: running slots: %w", len(reqs), err)
		}
	}
	for j, o := range old {
		if cmds[j].Val() == string(ledger.StatusRunning) {
			opens[o.req] = append(opens[o.req], o.slot)
		}
	}
	return nil
}

// Paused implements ledger.PauseReader: one EXISTS.
func (l *Ledger) Paused(ctx context.Context, job string) (bool, error) {
	if ctx == nil {
		return false, nilContext("Paused")
	}
	if err := l.checkFormatRead(ctx); err != nil {
		return false, err
	}
	n, err := l.rdb.Exists(ctx, l.pausedKey(job)).Result()
	if err != nil {
		return false, fmt.Errorf("redisledger: paused %s: %w", job, err)
	}
	return n == 1, nil
}

func (l *Ledger) pausedKey(job string) string { return l.prefix + "{" + job + "}:paused" }

// Begin implements Ledger.
func (l *Ledger) Begin(ctx context.Context, s ledger.Slot, f ledger.Fence, maxAttempts int, now time.Time) (attempt, left int, err error) {
	if ctx == nil {
		return 0, 0, nilContext("Begin")
	}
	if err := l.checkPolicy(ctx); err != nil {
		return 0, 0, err
	}
	k := l.keys(s.Job, s.Partition)
	fk, err := k.fenceOf(s, f)
	if err != nil {
		return 0, 0, fmt.Errorf("redisledger: begin %s: %w", s.Key(), err)
	}
	keys := []string{fk, k.run(s.At), k.open, k.unit, k.index, k.pending, k.retry}
	args := []any{f.Token.String(), ownerarg.Owner(f.Owner), unix(s.At), millis(now), max(maxAttempts, 1), f.Holder}
	if p := f.Planner; p != nil {
		keys = append(keys, k.unit)
		args = append(args, p.Token.String(), ownerarg.Owner(p.Owner))
	}
	res, err := parseReply(beginScript.Run(ctx, l.pipe, keys, args...))
	if err != nil {
		return 0, 0, fmt.Errorf("redisledger: begin %s: %w", s.Key(), redispolicy.MemoryFull(err))
	}
	switch res.code {
	case 1:
		return res.ints[0], res.ints[1], nil
	case 0:
		return 0, 0, ledger.ErrSlotDone
	case -2:
		return 0, 0, staleLedger(s, *f.Planner, res.current)
	default:
		return 0, 0, staleLedger(s, f, res.current)
	}
}

// BeginIfClear implements ClearBeginner: one script per request, all in
// one pipeline (one round trip). On Redis Cluster, where the pause flag
// lives under another hash tag, every answer is Clear == false, without a
// round trip; so is a request whose Fence is not of the unit scope.
func (l *Ledger) BeginIfClear(ctx context.Context, reqs []ledger.BeginRequest, now time.Time) []ledger.BeginResult {
	out := make([]ledger.BeginResult, len(reqs))
	if ctx == nil {
		for i := range out {
			out[i].Err = nilContext("BeginIfClear")
		}
		return out
	}
	if err := l.checkPolicy(ctx); err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	if l.cluster {
		return out
	}
	cmds := make([]*redis.Cmd, len(reqs))
	pipe := l.rdb.Pipeline()
	for i, r := range reqs {
		if slotScoped, err := checkFence(r.Slot, r.Fence); err != nil || slotScoped {
			continue
		}
		k, s := l.keys(r.Slot.Job, r.Slot.Partition), r.Slot
		cmds[i] = claimScript.Queue(ctx, pipe, claimScript.Prepared(
			[]string{k.unit, k.run(s.At), k.open, k.index, k.pending, k.retry, l.pausedKey(s.Job)},
			r.Fence.Token.String(), ownerarg.Owner(r.Fence.Owner), unix(s.At), millis(now), max(r.MaxAttempts, 1), unix(r.Prev), unix(r.Since), r.Fence.Holder, seenArg(r.Seen)))
	}
	if pipe.Len() == 0 {
		return out
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	replies := claimScript.Replies()
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		r := reqs[i]
		res, err := parseReply(replies.Fallback(ctx, l.rdb, cmd))
		switch {
		case err != nil:
			out[i] = ledger.BeginResult{Clear: true, Err: fmt.Errorf("redisledger: begin %s: %w", r.Slot.Key(), err)}
		case res.code == 2:
		case res.code == 1:
			out[i] = ledger.BeginResult{Attempt: res.ints[0], Left: res.ints[1], Clear: true}
		case res.code == 0:
			out[i] = ledger.BeginResult{Clear: true, Err: ledger.ErrSlotDone}
		default:
			out[i] = ledger.BeginResult{Clear: true, Err: staleLedger(r.Slot, r.Fence, res.current)}
		}
	}
	return out
}

// reply is a fenced script's reply {code, ...}: code 1 (and 0, 2) with
// the integers that follow it, or code -1 (-2) with the token that
// refused, a decimal string (nil: none stored, fence.None).
type reply struct {
	code    int64
	ints    []int
	current fence.Token
}

// parseReply reads cmd's reply as a reply.
func parseReply(cmd *redis.Cmd) (reply, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return reply{}, err
	}
	if len(vals) == 0 {
		return reply{}, fmt.Errorf("empty script reply")
	}
	code, ok := vals[0].(int64)
	if !ok {
		return reply{}, fmt.Errorf("script reply code %v (%T), want an integer", vals[0], vals[0])
	}
	r := reply{code: code}
	if code < 0 {
		if len(vals) > 1 && vals[1] != nil {
			s, ok := vals[1].(string)
			if !ok {
				return reply{}, fmt.Errorf("stored token %v (%T), want a decimal string", vals[1], vals[1])
			}
			if r.current, err = fence.ParseToken(s); err != nil {
				return reply{}, fmt.Errorf("stored token: %w", err)
			}
		}
		return r, nil
	}
	for _, v := range vals[1:] {
		n, ok := v.(int64)
		if !ok {
			return reply{}, fmt.Errorf("script reply value %v (%T), want an integer", v, v)
		}
		r.ints = append(r.ints, int(n))
	}
	return r, nil
}

// Heartbeat implements Ledger.
func (l *Ledger) Heartbeat(ctx context.Context, s ledger.Slot, f ledger.Fence, attempt int, now time.Time) error {
	if ctx == nil {
		return nilContext("Heartbeat")
	}
	if err := l.checkFormat(ctx); err != nil {
		return err
	}
	k := l.keys(s.Job, s.Partition)
	fk, err := k.fenceOf(s, f)
	if err != nil {
		return fmt.Errorf("redisledger: heartbeat %s: %w", s.Key(), err)
	}
	res, err := parseReply(heartbeatScript.Run(ctx, l.pipe, []string{fk, k.run(s.At), k.base + "cancel", k.unit},
		f.Token.String(), ownerarg.Owner(f.Owner), attempt, millis(now), unix(s.At)))
	if err != nil {
		return fmt.Errorf("redisledger: heartbeat %s: %w", s.Key(), err)
	}
	switch res.code {
	case 1:
		return nil
	case 2:
		return ledger.ErrCancelRequested
	}
	return staleLedger(s, f, res.current)
}

// RequestCancel implements Canceler.
func (l *Ledger) RequestCancel(ctx context.Context, job, partition string, slot time.Time) error {
	if ctx == nil {
		return nilContext("RequestCancel")
	}
	if err := l.checkFormat(ctx); err != nil {
		return err
	}
	k := l.keys(job, partition)
	if err := cancelScript.Run(ctx, l.rdb, []string{k.base + "cancel"}, unix(slot)).Err(); err != nil {
		return fmt.Errorf("redisledger: cancel %s: %w", job, err)
	}
	return nil
}

var _ ledger.Canceler = (*Ledger)(nil)

// Finish implements Ledger.
func (l *Ledger) Finish(ctx context.Context, s ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) error {
	if ctx == nil {
		return nilContext("Finish")
	}
	if err := l.checkFormat(ctx); err != nil {
		return err
	}
	k := l.keys(s.Job, s.Partition)
	fk, err := k.fenceOf(s, f)
	if err != nil {
		return fmt.Errorf("redisledger: finish %s: %w", s.Key(), err)
	}
	retry := ""
	if o.Status == ledger.StatusFailed && !o.RetryAt.IsZero() {
		retry = millis(o.RetryAt)
	}
	res, err := parseReply(finishScript.Run(ctx, l.pipe, []string{fk, k.run(s.At), k.open, k.retry, k.unit, k.index},
		f.Token.String(), ownerarg.Owner(f.Owner), unix(s.At), attempt, string(o.Status), string(o.Class), o.Error,
		millis(now), retry))
	if err != nil {
		return fmt.Errorf("redisledger: finish %s: %w", s.Key(), err)
	}
	if res.code != 1 {
		return staleLedger(s, f, res.current)
	}
	return nil
}

// Skip implements Ledger.
func (l *Ledger) Skip(ctx context.Context, s ledger.Slot, f ledger.Fence, status ledger.Status, reason string, now time.Time) error {
	if ctx == nil {
		return nilContext("Skip")
	}
	if err := l.checkPolicy(ctx); err != nil {
		return err
	}
	if status != ledger.StatusSkipped && status != ledger.StatusMissed {
		return fmt.Errorf("redisledger: skip %s: status %q, want skipped or missed", s.Key(), status)
	}
	k := l.keys(s.Job, s.Partition)
	fk, err := k.fenceOf(s, f)
	if err != nil {
		return fmt.Errorf("redisledger: skip %s: %w", s.Key(), err)
	}
	res, err := parseReply(skipScript.Run(ctx, l.pipe, []string{fk, k.run(s.At), k.unit, k.index},
		f.Token.String(), ownerarg.Owner(f.Owner), unix(s.At), string(status), reason, millis(now)))
	if err != nil {
		return fmt.Errorf("redisledger: skip %s: %w", s.Key(), err)
	}
	if res.code == -1 {
		return staleLedger(s, f, res.current)
	}
	return nil
}

// Request implements Ledger.
func (l *Ledger) Request(ctx context.Context, s ledger.Slot, reason string, now time.Time) error {
	if ctx == nil {
		return nilContext("Request")
	}
	if err := l.checkPolicy(ctx); err != nil {
		return err
	}
	k := l.keys(s.Job, s.Partition)
	n, err := requestScript.Run(ctx, l.rdb, []string{k.run(s.At), k.open, k.index, k.pending, k.retry, k.unit},
		unix(s.At), reason, millis(now)).Int64()
	if err != nil {
		return fmt.Errorf("redisledger: request %s: %w", s.Key(), err)
	}
	if n == -2 {
		return fmt.Errorf("%w: %s", ledger.ErrSlotRunning, s.Key())
	}
	return nil
}

// SetPaused implements Ledger.
func (l *Ledger) SetPaused(ctx context.Context, job string, paused bool) error {
	if ctx == nil {
		return nilContext("SetPaused")
	}
	if err := l.checkPolicy(ctx); err != nil {
		return err
	}
	var err error
	if paused {
		err = l.rdb.Set(ctx, l.pausedKey(job), "1", 0).Err()
	} else {
		err = l.rdb.Del(ctx, l.pausedKey(job)).Err()
	}
	if err != nil {
		return fmt.Errorf("redisledger: pause %s: %w", job, err)
	}
	return nil
}

// Get implements Ledger.
func (l *Ledger) Get(ctx context.Context, s ledger.Slot) (ledger.Record, bool, error) {
	if ctx == nil {
		return ledger.Record{}, false, nilContext("Get")
	}
	if err := l.checkFormatRead(ctx); err != nil {
		return ledger.Record{}, false, err
	}
	k := l.keys(s.Job, s.Partition)
	pipe := l.rdb.Pipeline()
	run := pipe.HGetAll(ctx, k.run(s.At))
	hot := pipe.HMGet(ctx, k.unit, hotFields...)
	if _, err := pipe.Exec(ctx); err != nil {
		return ledger.Record{}, false, fmt.Errorf("redisledger: get %s: %w", s.Key(), err)
	}
	if rec, ok := hotRecord(s.Job, s.Partition, hot.Val()); ok && rec.Slot.At.Equal(s.At) {
		return rec, true, nil
	}
	if len(run.Val()) == 0 {
		return ledger.Record{Slot: s}, false, nil
	}
	return parseRecord(s, run.Val()), true, nil
}

// hotFields are the unit hash's fields of its hot run (scripts/fence.lua:
// HOT), in order.
var hotFields = []string{"hot", "hot.owner", "hot.token", "hot.started", "hot.hb", "hot.holder"}

// hotRecord is the record of the unit's hot run from its HMGET of
// hotFields: its first attempt, running; ok false when there is none.
func hotRecord(job, partition string, v []any) (ledger.Record, bool) {
	if len(v) != len(hotFields) || str(v[0]) == "" {
		return ledger.Record{}, false
	}
	tok, _ := strconv.ParseUint(str(v[2]), 10, 64)
	return ledger.Record{
		Slot: ledger.Slot{Job: job, At: fromUnix(str(v[0])), Partition: partition}, Status: ledger.StatusRunning, Attempt: 1,
		Attempts: []ledger.Attempt{{N: 1, Token: fence.Token(tok), Owner: str(v[1]), Holder: str(v[5]), Status: ledger.StatusRunning,
			Started: fromMillis(str(v[3])), Heartbeat: fromMillis(str(v[4]))}},
	}, true
}

// str is v as a string: "" for a nil reply.
func str(v any) string {
	s, _ := v.(string)
	return s
}

// List implements Ledger.
func (l *Ledger) List(ctx context.Context, job, partition string, from, to time.Time, limit int) ([]ledger.Record, error) {
	if ctx == nil {
		return nil, nilContext("List")
	}
	if err := l.checkFormatRead(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	k := l.keys(job, partition)
	pipe := l.rdb.Pipeline()
	idx := pipe.ZRevRangeByScore(ctx, k.index, &redis.ZRangeBy{
		Min: ceilUnix(from), Max: "(" + ceilUnix(to), Count: int64(limit),
	})
	hot := pipe.HMGet(ctx, k.unit, hotFields...)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisledger: list %s: %w", job, err)
	}
	slots := idx.Val()
	pipe = l.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(slots))
	for i, m := range slots {
		cmds[i] = pipe.HGetAll(ctx, k.base+"run:"+m)
	}
	if len(slots) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("redisledger: list %s: %w", job, err)
		}
	}
	recs := make([]ledger.Record, 0, len(slots)+1)
	for i, m := range slots {
		recs = append(recs, parseRecord(ledger.Slot{Job: job, At: fromUnix(m), Partition: partition}, cmds[i].Val()))
	}
	// The hot run has no index entry: it goes in its place, newest first.
	if h, ok := hotRecord(job, partition, hot.Val()); ok && !h.Slot.At.Before(from) && h.Slot.At.Before(to) {
		i := sort.Search(len(recs), func(i int) bool { return !recs[i].Slot.At.After(h.Slot.At) })
		recs = append(recs[:i], append([]ledger.Record{h}, recs[i:]...)...)
		if len(recs) > limit {
			recs = recs[:limit]
		}
	}
	return recs, nil
}

func parseRecord(s ledger.Slot, m map[string]string) ledger.Record {
	rec := ledger.Record{Slot: s, Status: ledger.Status(m["status"]), Reason: m["reason"], RetryAt: fromMillis(m["retry_at"])}
	rec.Attempt, _ = strconv.Atoi(m["attempt"])
	for n := 1; n <= rec.Attempt; n++ {
		a := "a" + strconv.Itoa(n) + "."
		if _, ok := m[a+"status"]; !ok {
			continue
		}
		tok, _ := strconv.ParseUint(m[a+"token"], 10, 64)
		rec.Attempts = append(rec.Attempts, ledger.Attempt{
			N: n, Token: fence.Token(tok), Owner: m[a+"owner"], Holder: m[a+"holder"], Status: ledger.Status(m[a+"status"]),
			Class: ledger.ErrorClass(m[a+"class"]), Error: m[a+"error"],
			Started: fromMillis(m[a+"started"]), Heartbeat: fromMillis(m[a+"hb"]), Finished: fromMillis(m[a+"finished"]),
		})
	}
	return rec
}

// staleLedger is the refusal of f by the fence of its scope: Resource names
// the slot's (job, partition) records, Scope the fence.
func staleLedger(s ledger.Slot, f ledger.Fence, current fence.Token) error {
	return &fence.StaleTokenError{
		Resource: "ledger:" + ledger.UnitScope(s.Job, s.Partition), Scope: f.Scope,
		Presented: f.Token, Current: current,
	}
}

// nilContext is the error of method op called with a nil context.
func nilContext(op string) error { return fmt.Errorf("redisledger: %s: %w", op, ledger.ErrNilContext) }
