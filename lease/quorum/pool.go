package quorum

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/ownerarg"
)

// pool is redsync's goredis/v9 pool for one master, with two commands
// replaced so that the token costs no extra round trip on the way in and
// the release wakes waiters on the way out:
//
//   - SetNX runs scripts/acquire.lua: SET NX PX and, when it succeeded,
//     this node's token candidate, recorded in the acquireCall that
//     Backend.Acquire put in the context;
//   - Eval of the delete script, during Backend.Release, runs
//     scripts/release.lua: the same compare-and-delete, plus a PUBLISH.
//
// Everything else (Extend's touch script, redsync's clean-up after a
// failed try) goes through redsync's goredis pool, its owner argument
// made an ownerarg.Owner (see Eval).
type pool struct {
	inner redsyncredis.Pool
	rdb   redis.UniversalClient
	node  int
}

func newPool(rdb redis.UniversalClient, node int) *pool {
	return &pool{inner: goredis.NewPool(rdb), rdb: rdb, node: node}
}

// Get implements redsync's redis.Pool.
func (p *pool) Get(ctx context.Context) (redsyncredis.Conn, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := p.inner.Get(ctx)
	if err != nil {
		return nil, err
	}
	return &conn{Conn: c, ctx: ctx, p: p}, nil
}

type conn struct {
	redsyncredis.Conn
	ctx context.Context
	p   *pool
}

// callKey is the context key of the operation in progress: an
// *acquireCall during Acquire, releaseCall during Release.
type callKey struct{}

// releaseCall marks the context of Backend.Release.
var releaseCall = new(int)

// SetNX is redsync's lock command, replaced by the acquire script. It
// runs to the end even when redsync stops waiting for it (WithFailFast
// cancels the try's context once a majority decided), so that every
// master that answers holds the key of a successful acquisition, and a
// lease survives the loss of a master beyond the majority that answered
// first. A grant, or an error, that arrives after an acquisition was given
// up is undone at once (compare-and-delete: harmless where the key is not
// ours).
func (c *conn) SetNX(name, value string, expiry time.Duration) (bool, error) {
	call, _ := c.ctx.Value(callKey{}).(*acquireCall)
	ctx := context.WithoutCancel(c.ctx)
	var proposal int64
	if call != nil {
		proposal = call.proposal
	}
	res, err := acquireScript.Run(ctx, c.p.rdb, []string{name, name + fenceSuffix}, ownerarg.Owner(value), expiry.Milliseconds(), proposal).Slice()
	var r reply
	switch {
	case err != nil && neverSent(err):
		r = reply{state: down, err: err}
	case err != nil:
		r = reply{state: failed, err: err}
	case len(res) == 2 && asInt(res[0]) == 1 && asInt(res[1]) > 0:
		r = reply{state: granted, value: asInt(res[1])}
	case len(res) == 3 && asInt(res[0]) == 0:
		holder, _ := res[2].(string)
		r = reply{state: refused, value: asInt(res[1]), holder: holder}
	default:
		err = fmt.Errorf("quorum: unexpected acquire reply %v", res)
		r = reply{state: failed, err: err}
	}
	if call != nil {
		var undoErr error
		if !call.record(c.p.node, r) {
			undoErr = releaseScript.Run(ctx, c.p.rdb, []string{name}, ownerarg.Owner(value)).Err()
		}
		call.done(undoErr)
	}
	return r.state == granted, err
}

// Eval runs redsync's scripts, except during Release, where the delete
// script is replaced by the release script (same replies, plus a PUBLISH),
// and during Acquire, where redsync's clean-up after a failed try is left
// to Backend.Acquire: it knows which masters granted, and releases those
// before it returns or tries again. The string arguments of redsync's
// scripts (after their keys) are the owner: they go to go-redis as
// ownerarg.Owner, which prints as [owner] in traces and logs.
func (c *conn) Eval(script *redsyncredis.Script, keysAndArgs ...any) (any, error) {
	switch call := c.ctx.Value(callKey{}).(type) {
	case *int:
		if call == releaseCall && len(keysAndArgs) == 2 {
			key, _ := keysAndArgs[0].(string)
			return releaseScript.Run(c.ctx, c.p.rdb, []string{key}, ownerArgs(keysAndArgs[1:])...).Int64()
		}
	case *acquireCall:
		return int64(0), nil
	}
	if script.KeyCount >= 0 && script.KeyCount <= len(keysAndArgs) {
		keysAndArgs = append(slices.Clip(keysAndArgs[:script.KeyCount]), ownerArgs(keysAndArgs[script.KeyCount:])...)
	}
	return c.Conn.Eval(script, keysAndArgs...)
}

// ownerArgs returns args with every string made an ownerarg.Owner (a new
// slice): redsync's delete and touch scripts take the owner as their one
// string argument.
func ownerArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(string); ok {
			a = ownerarg.Owner(s)
		}
		out[i] = a
	}
	return out
}

func asInt(v any) int64 {
	n, _ := v.(int64)
	return n
}

// replyState is what one master answered to the acquire script.
type replyState uint8

const (
	none    replyState = iota // no answer (yet)
	granted                   // the key is ours; value is the candidate
	refused                   // another owner holds it; value is its PTTL in ms
	failed                    // an error; the key may or may not be ours
	down                      // the command was never sent (no connection): the key is not ours
)

// neverSent reports an error of a command that never reached its master:
// the connection could not be made (a master down, its port closed), so
// the script did not run. Any other error (a timeout, a reset connection)
// leaves it unknown whether it ran.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// mayHold reports whether a master that answered so may hold the key for
// the acquisition: it granted, or its answer was lost (the script may have
// run all the same).
func (s replyState) mayHold() bool { return s == granted || s == failed }

type reply struct {
	state  replyState
	value  int64
	holder string
	err    error
}

// acquireCall collects the masters' replies during one redsync try, also
// after redsync returned (WithFailFast makes it return as soon as a
// majority decided): Backend.Acquire takes a successful try as it stands,
// and waits a little for the rest before it judges a failed one. A grant
// that arrives after close is kept when the acquisition goes on, and
// undone when it was given up.
//
// A try is over on a master once its acquire script answered and a late
// grant was undone (done). Backend.Acquire tries again, with the same
// owner, only once the try is over on every master without an error
// (settled), so that no command of one try can reach a master after the
// next try's: a late grant of the first would be taken for the second's
// (acquire.lua answers a key holding its owner as granted), and its undo
// would delete the second's key.
type acquireCall struct {
	proposal  int64 // the token proposed to every master, 0 for none
	mu        sync.Mutex
	closed    bool
	abandoned bool
	over      int  // masters on which the try is over
	troubled  bool // a reply or a late undo failed
	replies   []reply
	all       chan struct{} // closed once the try is over on every master
}

func newAcquireCall(nodes int, proposal int64) *acquireCall {
	return &acquireCall{proposal: proposal, replies: make([]reply, nodes), all: make(chan struct{})}
}

// record stores node's reply; false when it is a late answer of an
// acquisition given up that may hold the key (a grant, or an error: the
// script may have run), which the caller must undo.
func (a *acquireCall) record(node int, r reply) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.state == failed {
		a.troubled = true
	}
	a.replies[node] = r
	if !a.closed {
		return true
	}
	return !(a.abandoned && r.state.mayHold())
}

// done marks the try over on one master, after record and the undo record
// asked for (undoErr: its error, nil when there was none).
func (a *acquireCall) done(undoErr error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if undoErr != nil {
		a.troubled = true
	}
	if a.over++; a.over == len(a.replies) {
		close(a.all)
	}
}

// settled reports whether the try is over on every master without an
// error (nothing of it can still reach a master), with every master's
// reply, those that came after close included.
func (a *acquireCall) settled() ([]reply, bool) {
	select {
	case <-a.all:
	default:
		return nil, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.replies), !a.troubled
}

// close returns the replies so far; kept tells whether the acquisition
// goes on (its late grants are kept) or was given up (they are undone).
func (a *acquireCall) close(kept bool) []reply {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	a.abandoned = !kept
	return slices.Clone(a.replies)
}

// abandon gives up an acquisition after close(true), when it is released
// or found unusable: later grants are undone. A grant whose reply came
// before is deleted by the release that follows, which reaches the master
// after it.
func (a *acquireCall) abandon() {
	a.mu.Lock()
	a.abandoned = true
	a.mu.Unlock()
}
