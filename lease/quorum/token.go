package quorum

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// maxToken bounds the tokens the scripts can issue exactly: Lua numbers
// are doubles.
const maxToken = 1 << 53

// votes summarises the masters' replies to one redsync try.
type votes struct {
	replies  []reply
	granted  int
	refused  int
	failed   int     // errors after which the key may be ours
	down     int     // masters the command never reached
	maxCand  int64   // the largest candidate among the granted
	refusals []int64 // the holders' PTTLs in ms
}

func count(replies []reply) votes {
	v := votes{replies: replies}
	for _, r := range replies {
		switch r.state {
		case granted:
			v.granted++
			v.maxCand = max(v.maxCand, r.value)
		case refused:
			v.refused++
			v.refusals = append(v.refusals, r.value)
		case failed:
			v.failed++
		case down:
			v.down++
		}
	}
	return v
}

// heldByMajority reports whether the try saw one other owner hold the
// lease on a majority of the masters: the lease is taken, and trying again
// cannot win before that owner's keys expire. Anything else (a split vote
// between racers, or masters that did not answer in time, which may hide
// a majority or not) leaves the lease possibly free, and is worth another
// try once the racers have released their minorities.
func (v votes) heldByMajority(quorum int) bool {
	holders := map[string]int{}
	for _, r := range v.replies {
		if r.state == refused {
			if holders[r.holder]++; holders[r.holder] >= quorum {
				return true
			}
		}
	}
	return false
}

// remaining estimates how long until the lease may be free on a majority:
// the masters that granted us are free again (redsync released them), and
// the rest of a majority must wait for the holders' keys to expire, the
// shortest first. 0 when unknown.
func (v votes) remaining(quorum int) time.Duration {
	need := quorum - v.granted
	if need <= 0 || len(v.refusals) == 0 {
		return 0
	}
	slices.Sort(v.refusals)
	ms := v.refusals[min(need, len(v.refusals))-1]
	return time.Duration(max(ms, 1)) * time.Millisecond
}

// issue turns a redsync lock on a majority into a lease: the token is the
// largest candidate of the masters that granted the lock (a majority),
// then a majority of counters is raised to it, then the time is checked.
func (b *Backend) issue(ctx context.Context, name, owner string, m *redsync.Mutex, call *acquireCall, v votes, start time.Time, ttl time.Duration) (leasedriver.Grant, error) {
	t := v.maxCand
	if v.granted < b.quorum || t <= 0 || t >= maxToken {
		b.abandon(ctx, m, call)
		return leasedriver.Grant{}, errors.New("quorum: inconsistent acquire replies")
	}
	// Counters already at t: the master that issued it (and any that
	// issued the same value). The others that granted are raised.
	at := 0
	var targets []int
	for i, r := range v.replies {
		switch {
		case r.state != granted:
		case r.value >= t:
			at++
		default:
			targets = append(targets, i)
		}
	}
	if at < b.quorum {
		raised, err := b.raise(ctx, name, t, targets)
		if at += raised; at < b.quorum {
			b.abandon(ctx, m, call)
			return leasedriver.Grant{}, b.noQuorum("raise", at, at, err)
		}
	}
	// The validity check comes after both token phases: a token is usable
	// only while the keys that a majority granted are still alive.
	if took, limit := time.Since(start), ttl-leasedriver.Drift(ttl); took >= limit {
		b.abandon(ctx, m, call)
		return leasedriver.Grant{}, &leasedriver.SlowAcquireError{Name: name, Took: took, TTL: ttl}
	}
	b.store(name, owner, m, call)
	return leasedriver.Grant{Acquired: true, Token: fence.Token(t)}, nil
}

// raise runs the raise script with token t on the targets in parallel and
// waits for all of them: the targets answered the acquire a moment ago, so
// none is expected to hang. It returns how many counters are now at t or
// above, and the errors of the others.
func (b *Backend) raise(ctx context.Context, name string, t int64, targets []int) (int, error) {
	_, fenceKey := b.Keys(name)
	keys := []string{fenceKey}
	arg := strconv.FormatInt(t, 10)
	one := func(node int) error {
		got, err := raiseScript.Run(ctx, b.nodes[node], keys, arg).Int64()
		if err == nil && got < t {
			err = errors.New("quorum: raise left the counter below the token")
		}
		if err != nil {
			return &redsync.RedisError{Node: node, Err: err}
		}
		return nil
	}
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i := 1; i < len(targets); i++ {
		wg.Go(func() { errs[i] = one(targets[i]) })
	}
	if len(targets) > 0 {
		errs[0] = one(targets[0])
	}
	wg.Wait()
	raised := 0
	for _, e := range errs {
		if e == nil {
			raised++
		}
	}
	return raised, errors.Join(errs...)
}
