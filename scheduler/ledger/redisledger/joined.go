package redisledger

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/redispolicy"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// The joined transitions take or give back a unit's lease in the script
// that begins or finishes its slot: the scheduler's claim of a slot due on
// time costs one script where acquire and begin took one each, its end one
// where finish and release took one each, and on a single server (or
// Sentinel) one script answers a whole batch of units, so a replica that
// finds the leases held pays a few commands per unit, not a script call.
// They need the leases on the ledger's own client (redislease.Backend's
// Joinable); the ledger's hash tag is the unit lease's name, so on Cluster
// a unit's lease and records share a slot and each unit is one script.

// ClaimAll implements ledger.LeaseJoiner on a *redislease.Backend over
// the ledger's own client, without replica acknowledgements
// (redislease.Backend.Joinable), and returns ledger.ErrNotJoinable for any
// other. It takes the leases of reqs with the backend's keys and begins
// the slots asked for, each in the script that took its lease
// (claimall.lua): one script for all of reqs on a single server or
// Sentinel, one per request on Cluster (where only the first limit
// requests not skipped are tried), all in one pipeline (one round trip per
// node). The claim markers of the requests' groups are read first (one
// MGET per instant, see markers.go): the requests of a marked group are
// answered held (no grant, Remaining 0) and not tried, and every group
// tried whole is marked (off Cluster by the script, on Cluster by one
// more pipeline after the scripts answered). On Cluster the jobs' pause
// flags, under another hash tag, are read with the markers: a paused
// job's slot is not begun (Begin.Clear false), as when State read the
// flag before Begin. A slot found done
// has its lease, unused, released in the same script (the request is
// answered not acquired, Begin.Err ledger.ErrSlotDone). A CheckOnly
// request's slot is read before its lease, as every begin's is, and never
// begun. It returns one
// result per request. A request whose script failed gets its error, its
// lease, which may have been taken, released on a best effort (and its
// slot, which may have been begun, is found abandoned by the next claim,
// as after a crash between Begin and the run).
func (l *Ledger) ClaimAll(ctx context.Context, leases leasedriver.Backend, reqs []ledger.ClaimRequest, limit int, now time.Time) ([]ledger.ClaimResult, error) {
	if ctx == nil {
		return nil, nilContext("ClaimAll")
	}
	b, ok := leases.(*redislease.Backend)
	if !ok || !b.Joinable(l.rdb) {
		return nil, ledger.ErrNotJoinable
	}
	out := make([]ledger.ClaimResult, len(reqs))
	if len(reqs) == 0 {
		return out, nil
	}
	// The leases are taken by this script, not by the backend's Acquire:
	// check the Redis for both (the same client, Joinable).
	if err := l.checkPolicy(ctx); err != nil {
		return nil, err
	}
	if err := b.CheckPolicy(ctx); err != nil {
		return nil, fmt.Errorf("redisledger: claim: leases: %w", err)
	}
	if err := b.CheckFormat(ctx); err != nil {
		return nil, fmt.Errorf("redisledger: claim: leases: %w", err)
	}
	if l.cluster {
		return l.claimCluster(ctx, b, reqs, limit, now, out)
	}
	paused := map[string]bool{} // off Cluster the script reads the pause flags
	all, marks, err := l.skipMarked(ctx, reqs, paused, out)
	if err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out, nil
	}
	if len(all) == 0 {
		return out, nil
	}
	err = l.claimScripts(ctx, b, reqs, [][]int{all}, paused, now, out, func(keys []string, args []any) ([]string, []any) {
		args[1] = limit
		args = append(args, len(marks))
		for _, m := range marks {
			keys = append(keys, m.key)
			args = append(args, m.first+1, m.last+1, max(m.ttl.Milliseconds(), 1))
		}
		return keys, args
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// claimCluster is ClaimAll on Cluster: one script per unit (the units'
// keys are in different slots), the first limit units not skipped tried
// (0: all), the pause flags and the claim markers read first in one
// pipeline, and the markers of the groups whose units were all tried set
// after the scripts answered (markTried).
func (l *Ledger) claimCluster(ctx context.Context, b *redislease.Backend, reqs []ledger.ClaimRequest, limit int, now time.Time, out []ledger.ClaimResult) ([]ledger.ClaimResult, error) {
	// The groups are cut as off Cluster, where the script reads the pause
	// flags: a paused job's units are in them and tried (their leases
	// taken, no slot begun), so every replica cuts the same groups
	// whatever it read of the flags.
	groups := l.claimGroups(reqs, func(r ledger.ClaimRequest) *ledger.BeginRequest { return l.begins(r, nil) })
	paused, marked, err := l.clusterReads(ctx, reqs, groups)
	if err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out, nil
	}
	skip := make([]bool, len(reqs))
	for g, m := range marked {
		for i := groups[g].first; m && i <= groups[g].last; i++ {
			skip[i] = true
		}
	}
	var tries [][]int
	for i := range reqs {
		switch {
		case skip[i]:
			out[i] = ledger.ClaimResult{} // held: no grant, Remaining unknown
		case limit > 0 && len(tries) >= limit:
			out[i].Err = leasedriver.ErrNotTried
		default:
			tries = append(tries, []int{i})
		}
	}
	if len(tries) == 0 {
		return out, nil
	}
	if err := l.claimScripts(ctx, b, reqs, tries, paused, now, out, nil); err != nil {
		return nil, err
	}
	l.markTried(ctx, groups, marked, out)
	return out, nil
}

// claimScripts runs claimall.lua once per entry of groups (the indexes of
// the requests of one script), all in one pipeline, and answers those
// requests in out. A request whose script failed gets its error and its
// lease, which may have been taken, released on a best effort (its slot,
// which may have been begun, is found abandoned by the next claim, as
// after a crash between Begin and the run). complete, when not nil,
// completes each script's keys and arguments (the limit and the claim
// markers off Cluster). It returns an error only for a request whose keys
// cannot be built, before anything is sent.
func (l *Ledger) claimScripts(ctx context.Context, b *redislease.Backend, reqs []ledger.ClaimRequest, groups [][]int, paused map[string]bool, now time.Time, out []ledger.ClaimResult, complete func(keys []string, args []any) ([]string, []any)) error {
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(groups))
	for g, idx := range groups {
		keys, args, err := l.claimCommand(b, reqs, idx, paused, now)
		if err != nil {
			return err
		}
		if complete != nil {
			keys, args = complete(keys, args)
		}
		cmds[g] = claimAllScript.Queue(ctx, pipe, claimAllScript.Prepared(keys, args...))
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	var undo []leasedriver.Held
	replies := claimAllScript.Replies()
	for g, idx := range groups {
		vals, err := replies.Fallback(ctx, l.rdb, cmds[g]).Slice()
		if err == nil && len(vals) != 4*len(idx) {
			err = fmt.Errorf("claim script reply of %d values for %d units", len(vals), len(idx))
		}
		for j, i := range idx {
			if err != nil {
				out[i].Err = redispolicy.MemoryFull(err)
				r := reqs[i].Lease
				undo = append(undo, leasedriver.Held{Name: r.Name, Owner: r.Owner, TTL: r.TTL})
				continue
			}
			out[i] = l.claimResult(b, reqs[i], vals[4*j:4*j+4], paused)
		}
	}
	if len(undo) > 0 {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undo[0].TTL)
		defer cancel()
		_ = b.ReleaseAll(rctx, undo)
	}
	return nil
}

// skipMarked answers the requests of the claim groups whose marker is set
// as held, in out, and returns the indexes of the others, for the script
// to try, and the groups among them whose markers the script sets, with
// first and last as positions in that list.
func (l *Ledger) skipMarked(ctx context.Context, reqs []ledger.ClaimRequest, paused map[string]bool, out []ledger.ClaimResult) (tries []int, marks []claimGroupOf, err error) {
	groups := l.claimGroups(reqs, func(r ledger.ClaimRequest) *ledger.BeginRequest { return l.begins(r, paused) })
	marked, err := l.markedGroups(ctx, groups)
	if err != nil {
		return nil, nil, err
	}
	skip := make([]bool, len(reqs))
	for g, m := range marked {
		for i := groups[g].first; m && i <= groups[g].last; i++ {
			skip[i] = true
			out[i] = ledger.ClaimResult{} // held: no grant, Remaining unknown
		}
	}
	pos := make([]int, len(reqs))
	tries = make([]int, 0, len(reqs))
	for i := range reqs {
		if !skip[i] {
			pos[i] = len(tries)
			tries = append(tries, i)
		}
	}
	for g, m := range marked {
		if !m {
			gr := groups[g]
			gr.first, gr.last = pos[gr.first], pos[gr.last]
			marks = append(marks, gr)
		}
	}
	return tries, marks, nil
}

// claimCommand builds the keys and arguments of claimall.lua for the
// requests idx of reqs.
func (l *Ledger) claimCommand(b *redislease.Backend, reqs []ledger.ClaimRequest, idx []int, paused map[string]bool, now time.Time) (keys []string, args []any, err error) {
	// No limit (0): one unit per script on Cluster. The script derives the
	// lease's other keys (redislease.Keys: :fence, :waiting, :holder) from
	// its key, and the unit's from its base.
	args = append(args, millis(now), 0, len(idx), b.IdleCounterTTL().Milliseconds())
	var pausedJob, pausedKey string // the last unit's job's pause flag: units come grouped by job
	for _, i := range idx {
		r := reqs[i]
		lk, err := b.LeaseKey(r.Lease.Name)
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, lk)
		bg := l.begins(r, paused)
		if bg == nil {
			args = append(args, ownerarg.Owner(r.Lease.Owner), r.Lease.TTL.Milliseconds(), 1, 0, 0, 0, 0, b.HolderLabel(), "", 0)
			continue
		}
		slot := bg.Slot
		keys = append(keys, l.keyBase(slot.Job, slot.Partition))
		n := 2
		if !l.cluster {
			if pausedKey == "" || slot.Job != pausedJob {
				pausedJob, pausedKey = slot.Job, l.pausedKey(slot.Job)
			}
			keys = append(keys, pausedKey)
			n++
		}
		attempts := max(bg.MaxAttempts, 1)
		if r.CheckOnly {
			attempts = 0 // read for done, never begun
		}
		args = append(args, ownerarg.Owner(r.Lease.Owner), r.Lease.TTL.Milliseconds(), n,
			unix(slot.At), attempts, unix(bg.Prev), unix(bg.Since), b.HolderLabel(), bg.Fence.Holder, seenArg(bg.Seen))
	}
	return keys, args, nil
}

// begins returns r's begin to make in the script, or nil: none asked for,
// a slot not of the lease's unit, or a paused job (read beforehand on
// Cluster).
func (l *Ledger) begins(r ledger.ClaimRequest, paused map[string]bool) *ledger.BeginRequest {
	bg := r.Begin
	if bg == nil || ledger.UnitScope(bg.Slot.Job, bg.Slot.Partition) != r.Lease.Name || paused[bg.Slot.Job] {
		return nil
	}
	return bg
}

// clusterReads reads, on Cluster, the pause flags of the jobs of reqs'
// begins and which of groups have their claim marker set, in one
// pipeline (one round trip per node; the markers of one instant share a
// hash slot, so they are one MGET).
func (l *Ledger) clusterReads(ctx context.Context, reqs []ledger.ClaimRequest, groups []claimGroupOf) (paused map[string]bool, marked []bool, err error) {
	paused = map[string]bool{}
	flags := map[string]*redis.IntCmd{}
	pipe := l.rdb.Pipeline()
	for _, r := range reqs {
		if r.Begin == nil || flags[r.Begin.Slot.Job] != nil {
			continue
		}
		flags[r.Begin.Slot.Job] = pipe.Exists(ctx, l.pausedKey(r.Begin.Slot.Job))
	}
	markers := queueMarkerReads(ctx, pipe, groups)
	if pipe.Len() == 0 {
		return paused, make([]bool, len(groups)), nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, fmt.Errorf("redisledger: claim: pause flags and markers: %w", err)
	}
	for job, cmd := range flags {
		paused[job] = cmd.Val() == 1
	}
	return paused, markers(), nil
}

// claimResult reads one unit's 4 values of the claim script's reply.
func (l *Ledger) claimResult(b *redislease.Backend, r ledger.ClaimRequest, v []any, paused map[string]bool) ledger.ClaimResult {
	var res ledger.ClaimResult
	switch code, _ := v[1].(int64); {
	case code == 5:
		res.Err = leasedriver.ErrNotTried
		return res
	case code == 4 && r.Begin != nil && v[0] == int64(0):
		// Done, read before the lease, which was not taken.
		res.Begin = &ledger.BeginResult{Clear: true, Err: ledger.ErrSlotDone}
		return res
	}
	switch tok := v[0].(type) {
	case int64: // held: minus the remaining TTL
		res.Grant = leasedriver.Grant{Remaining: time.Duration(-tok) * time.Millisecond}
		return res
	case string:
		t, err := fence.ParseToken(tok)
		if err != nil {
			res.Err = fmt.Errorf("redisledger: claim %s: token: %w", r.Lease.Name, err)
			return res
		}
		res.Grant = b.Granted(r.Lease.Name, r.Lease.Owner, r.Lease.TTL, t)
	default:
		res.Err = fmt.Errorf("redisledger: claim %s: token %v (%T)", r.Lease.Name, v[0], v[0])
		return res
	}
	if r.Begin == nil {
		return res
	}
	bg := &ledger.BeginResult{}
	res.Begin = bg
	code, _ := v[1].(int64)
	switch {
	case code == 3 || code == 2: // not asked for (a paused job, another unit's slot) or not clear: plan
	case code == 1:
		a, _ := v[2].(int64)
		left, _ := v[3].(int64)
		*bg = ledger.BeginResult{Attempt: int(a), Left: int(left), Clear: true}
	case code == 4:
		// Done: the script released the lease, unused.
		res.Grant = leasedriver.Grant{}
		*bg = ledger.BeginResult{Clear: true, Err: ledger.ErrSlotDone}
	default:
		var cur fence.Token
		if s, ok := v[2].(string); ok {
			cur, _ = fence.ParseToken(s)
		}
		f := ledger.Fence{Scope: r.Lease.Name, Token: res.Grant.Token, Owner: r.Lease.Owner}
		*bg = ledger.BeginResult{Clear: true, Err: staleLedger(r.Begin.Slot, f, cur)}
	}
	return res
}

// FinishRelease implements ledger.LeaseJoiner: Finish of attempt under f
// and the release of the lease h of leases, in one script
// (finishrelease.lua) when leases is a *redislease.Backend joinable to the
// ledger's client and f is h's fence of the unit scope (its Scope h.Name,
// ledger.UnitScope of s, its Owner h.Owner); otherwise Finish, then the
// backend's Release. The release is made whether or not the finish was accepted.
// finishErr is Finish's error; releaseErr is b.Release's (nil,
// lease.ErrNotHeld, or a Redis error, which the finish shares when they
// ran in one script).
func (l *Ledger) FinishRelease(ctx context.Context, leases leasedriver.Backend, h leasedriver.Held, s ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) (finishErr, releaseErr error) {
	if ctx == nil {
		return nilContext("FinishRelease"), nilContext("FinishRelease")
	}
	if err := l.checkFormat(ctx); err != nil {
		return err, err
	}
	b, ok := leases.(*redislease.Backend)
	if !ok || !b.Joinable(l.rdb) || f.Scope != h.Name || f.Owner != h.Owner || f.Scope != ledger.UnitScope(s.Job, s.Partition) || f.Planner != nil {
		finishErr = l.Finish(ctx, s, f, attempt, o, now)
		return finishErr, leases.Release(ctx, h)
	}
	// The fence is the unit's (its scope, checked above): the unit hash.
	if _, err := checkFence(s, f); err != nil {
		err = fmt.Errorf("redisledger: finish %s: %w", s.Key(), err)
		return err, b.Release(ctx, h)
	}
	lk, err := b.LeaseKey(h.Name)
	if err != nil {
		return err, err
	}
	retry := ""
	if o.Status == ledger.StatusFailed && !o.RetryAt.IsZero() {
		retry = millis(o.RetryAt)
	}
	c := &finishCall{
		base: l.keyBase(s.Job, s.Partition), lease: lk, at: s.At,
		args: [9]any{f.Token.String(), ownerarg.Owner(f.Owner), unix(s.At), attempt, string(o.Status), string(o.Class), o.Error, millis(now), retry},
	}
	if l.cluster {
		l.finishOne(ctx, c) // the units' keys are in different slots
	} else {
		l.fin.Do(ctx, c)
	}
	if c.err != nil {
		err = fmt.Errorf("redisledger: finish %s: %w", s.Key(), c.err)
		return err, err
	}
	if c.released != 1 {
		releaseErr = lease.ErrNotHeld
	}
	if c.code != 1 {
		cur, _ := fence.ParseToken(c.cur)
		finishErr = staleLedger(s, f, cur)
	}
	return finishErr, releaseErr
}

// finishCall is one FinishRelease, joined with those of concurrent runs
// (Ledger.fin): its keys and values as finishrelease.lua's, then its
// answer.
type finishCall struct {
	base  string    // the unit's key base: finishall.lua's keys are lease and base
	lease string    // the lease's key
	at    time.Time // the slot: its run hash, for finishrelease.lua (keys)
	args  [9]any

	released, code int64  // the release's answer (1: released), the finish's (1: recorded)
	cur            string // the stored token when the fence refused the finish
	err            error
}

// maxFinishBatch bounds the runs one finishall.lua call ends: a script
// blocks the server while it runs (about 15 µs per run).
const maxFinishBatch = 256

// fail answers c with err (a Redis error, ctx's).
func (c *finishCall) fail(err error) { c.err = err }

// answer records c's 3 values of finishrelease.lua's or finishall.lua's
// reply.
func (c *finishCall) answer(v []any) {
	c.released, _ = v[0].(int64)
	c.code, _ = v[1].(int64)
	c.cur, _ = v[2].(string)
	if c.released == -1 {
		c.err = runError(c.cur)
	}
}

// runError is the error reply of one run's commands in finishall.lua (a
// key of the wrong type): a redis.Error, as the same reply to a lone
// run's script is.
type runError string

func (e runError) Error() string { return string(e) }

// RedisError marks runError as a Redis error reply (redis.Error).
func (runError) RedisError() {}

var _ redis.Error = runError("")

// keys is finishrelease.lua's keys for c (made only for a call sent
// alone: finishall.lua derives them from the base): the fence (the unit
// hash), the run hash, open, retry, the unit hash, the index, the lease and
// its waiting flag.
func (c *finishCall) keys() []string {
	k := keysAt(c.base)
	return []string{k.unit, k.run(c.at), k.open, k.retry, k.unit, k.index, c.lease, redislease.Keys{Lease: c.lease}.Tagged("waiting")}
}

// finishOne runs c alone (finishrelease.lua).
func (l *Ledger) finishOne(ctx context.Context, c *finishCall) {
	vals, err := finishReleaseScript.Run(ctx, l.pipe, c.keys(), c.args[:]...).Slice()
	if err == nil && len(vals) != 3 {
		err = fmt.Errorf("finish and release script reply of %d values", len(vals))
	}
	if err != nil {
		c.fail(err)
		return
	}
	c.answer(vals)
}

// finishMany runs calls in finishall.lua calls of at most maxFinishBatch
// runs each, one after the other.
func (l *Ledger) finishMany(ctx context.Context, calls []*finishCall) {
	for len(calls) > 0 {
		batch := calls[:min(len(calls), maxFinishBatch)]
		calls = calls[len(batch):]
		keys := make([]string, 0, 2*len(batch))
		args := make([]any, 1, 1+9*len(batch))
		args[0] = len(batch)
		for _, c := range batch {
			keys = append(keys, c.lease, c.base)
			args = append(args, c.args[:]...)
		}
		vals, err := finishAllScript.Run(ctx, l.pipe, keys, args...).Slice()
		if err == nil && len(vals) != 3*len(batch) {
			err = fmt.Errorf("joined finish script reply of %d values for %d runs", len(vals), len(batch))
		}
		for i, c := range batch {
			if err != nil {
				c.fail(err)
				continue
			}
			c.answer(vals[3*i : 3*i+3])
		}
	}
}

// finishInFlight bounds the joined finish calls in flight at once per
// Ledger (Ledger.fin); the runs that end meanwhile wait and go in the next
// call.
const finishInFlight = 2
