package leasedrivertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/lease/leasetest"
)

// contract lists the checks Exercise runs, in the order of the package
// documentation.
var contract = []check{
	{"RacingAcquirersExactlyOneWins", racingAcquirersExactlyOneWins},
	{"FailedTryIsOneCommand", failedTryIsOneCommand},
	{"TokensStrictlyIncrease", tokensStrictlyIncrease},
	{"NonOwnerRenewAndReleaseChangeNothing", nonOwnerRenewAndReleaseChangeNothing},
	{"ReleaseIsIdempotentAndCancelsWithErrReleased", releaseIsIdempotent},
	{"KeepAliveHoldsPastTTL", keepAliveHoldsPastTTL},
	{"DeletedKeyIsLostWithErrNotHeld", deletedKeyIsLost},
	{"UnrenewedLeaseIsFreedAfterItsTTL", unrenewedLeaseIsFreed},
	{"LifetimeEndLosesWithErrParentDoneAndFreesKey", lifetimeEndLoses},
	{"AcquireContextBoundsOnlyTheWait", acquireContextBoundsOnlyTheWait},
	{"WaiterIsWokenByRelease", waiterIsWokenByRelease},
	{"AcquireGivesUpWhenContextEnds", acquireGivesUp},
	{"BadInputGetsTypedErrors", badInputGetsTypedErrors},
	{"FrozenHolderIsLostWithErrExpired", frozenHolderIsLost},
	{"TryAcquireAllAnswersEachName", tryAcquireAllAnswersEachName},
	{"HolderLabelIsStoredWithTheLease", holderLabelIsStored},
}

// Time limits of the checks: generous, as they bound a wait for something
// that should happen in milliseconds, on a loaded CI machine too.
const (
	longTTL = time.Minute // no renewal happens during a check
	limit   = 10 * time.Second
)

func racingAcquirersExactlyOneWins(t *testing.T, e *env) {
	name := "race"
	const racers = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []*lease.Lease
		refused int
	)
	// Each racer has its own Client, as separate replicas do.
	clients := make([]*lease.Client, racers)
	for i := range clients {
		clients[i] = e.client(t)
	}
	start := make(chan struct{})
	for _, c := range clients {
		wg.Go(func() {
			<-start
			l, err := c.TryAcquire(context.Background(), name, longTTL)
			mu.Lock()
			defer mu.Unlock()
			var nae *lease.NotAcquiredError
			switch {
			case err == nil:
				winners = append(winners, l)
			case errors.As(err, &nae):
				refused++
				if nae.RemainingTTL <= 0 || nae.RemainingTTL > longTTL {
					t.Errorf("RemainingTTL = %v, want in (0, %v]", nae.RemainingTTL, longTTL)
				}
			default:
				t.Errorf("TryAcquire: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, l := range winners {
		held(t, l)
	}
	require.Len(t, winners, 1, "exactly one racer wins")
	require.Equal(t, racers-1, refused, "every other racer gets *NotAcquiredError")
	e.requireOwner(t, name, winners[0].Holder().Owner, "the winner's owner is stored")
}

func failedTryIsOneCommand(t *testing.T, e *env) {
	if e.Commands == nil {
		t.Skip("leasetest: skipped: the Store has no Commands")
	}
	ctx := context.Background()
	name := "commands"
	c := e.client(t)
	l, err := c.TryAcquire(ctx, name, longTTL)
	require.NoError(t, err)
	held(t, l)
	// Warm up: the first call of a script may cost a NOSCRIPT reply and
	// an EVAL.
	_, err = c.TryAcquire(ctx, name, longTTL)
	require.ErrorIs(t, err, lease.ErrNotAcquired)

	before := e.Commands()
	const tries = 10
	for range tries {
		_, err := c.TryAcquire(ctx, name, longTTL)
		require.ErrorIs(t, err, lease.ErrNotAcquired)
	}
	require.Equal(t, int64(tries), e.Commands()-before, "a failed try is one command")
	before = e.Commands()
	require.NoError(t, l.Release(ctx))
	require.LessOrEqual(t, e.Commands()-before, int64(2), "a release is one command (two on a cold script cache)")
}

func tokensStrictlyIncrease(t *testing.T, e *env) {
	ctx := context.Background()
	name := "tokens"
	// Two clients taking turns: the order holds across clients too.
	clients := []*lease.Client{e.client(t), e.client(t)}
	var last fence.Token
	owners := map[string]bool{}
	for i := range 200 {
		l, err := clients[i%2].TryAcquire(ctx, name, longTTL)
		require.NoError(t, err, "acquisition %d", i)
		held(t, l)
		require.Greater(t, l.Token(), last, "acquisition %d: tokens strictly increase", i)
		require.NotEmpty(t, l.Holder().Owner)
		require.False(t, owners[l.Holder().Owner], "acquisition %d: owner reused", i)
		h, ok := fence.HolderFromContext(l.Context())
		require.True(t, ok, "the lease context carries the holder")
		require.Equal(t, fence.Holder{Scope: name, Token: l.Token(), Owner: l.Holder().Owner}, h, "Scope is the lease name")
		require.Equal(t, h, l.Holder())
		owners[l.Holder().Owner] = true
		last = l.Token()
		require.NoError(t, l.Release(ctx))
	}
}

func nonOwnerRenewAndReleaseChangeNothing(t *testing.T, e *env) {
	ctx := context.Background()
	name := "owned"
	c := e.client(t)
	a, err := c.TryAcquire(ctx, name, longTTL)
	require.NoError(t, err)
	held(t, a)
	// a's lease vanishes (expiry, eviction) and b takes it.
	require.NoError(t, e.Expire(ctx, name))
	const bTTL = 5 * time.Second
	b, err := c.TryAcquire(ctx, name, bTTL)
	require.NoError(t, err)
	held(t, b)
	require.Greater(t, b.Token(), a.Token())

	require.ErrorIs(t, a.Renew(ctx), lease.ErrNotHeld)
	require.ErrorIs(t, a.Err(), lease.ErrNotHeld, "a is lost with the renew's cause")
	require.ErrorIs(t, a.Release(ctx), lease.ErrNotHeld)

	e.requireOwner(t, name, b.Holder().Owner, "a's release must not delete b's lease")
	if e.Inspect != nil {
		_, ttl, err := e.Inspect(ctx, name)
		require.NoError(t, err)
		require.Greater(t, ttl, time.Duration(0))
		require.LessOrEqual(t, ttl, bTTL, "a's renew must not extend b's lease")
	}
	require.NoError(t, b.Err())
	require.NoError(t, b.Renew(ctx), "b still holds its lease")
	_, err = c.TryAcquire(ctx, name, longTTL)
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	require.NoError(t, b.Release(ctx))
	next, err := c.TryAcquire(ctx, name, longTTL)
	require.NoError(t, err)
	held(t, next)
	require.Greater(t, next.Token(), b.Token(), "renew and release never move the token back")
	require.NoError(t, next.Release(ctx))
}

func releaseIsIdempotent(t *testing.T, e *env) {
	ctx := context.Background()
	name := "release"
	c := e.client(t)
	l, err := c.TryAcquire(ctx, name, longTTL)
	require.NoError(t, err)
	held(t, l)
	require.NoError(t, l.Err())

	require.NoError(t, l.Release(ctx))
	testwait.Done(t, l.Done(), time.Second, "Done after Release")
	require.NoError(t, l.Release(ctx), "a second Release returns the first one's result")
	require.ErrorIs(t, l.Err(), lease.ErrLost)
	require.ErrorIs(t, l.Err(), lease.ErrReleased)
	require.ErrorIs(t, context.Cause(l.Context()), lease.ErrReleased)
	var lost *lease.LostError
	require.ErrorAs(t, l.Err(), &lost)
	require.Equal(t, name, lost.Name)
	e.requireOwner(t, name, "", "the lease is deleted")
	require.ErrorIs(t, l.Renew(ctx), lease.ErrReleased, "a released lease cannot be renewed")

	// The lease is free for the next holder, with a larger token.
	l2, err := c.TryAcquire(ctx, name, longTTL)
	require.NoError(t, err)
	held(t, l2)
	require.Greater(t, l2.Token(), l.Token())
	require.NoError(t, l2.Release(ctx))
}

func keepAliveHoldsPastTTL(t *testing.T, e *env) {
	ctx := context.Background()
	name := "kept"
	c := e.client(t)
	// Renewed every TTL/3, the lease survives a keep-alive stalled for up
	// to about 2/3 of its TTL: 5 s leaves a loaded CI machine (a cold
	// build cache compiling with -race beside the tests) 3.3 s, where
	// 2 s once lost the lease ("trust window ended without a successful
	// renew").
	const ttl = 5 * time.Second
	start := time.Now()
	l, err := c.TryAcquire(ctx, name, ttl)
	require.NoError(t, err)
	held(t, l)
	testwait.Until(t, 2*ttl+limit, "two TTLs pass", func() bool {
		require.NoError(t, l.Err(), "the lease is lost while kept alive")
		return time.Since(start) > 2*ttl
	})
	require.NoError(t, l.Err())
	e.requireOwner(t, name, l.Holder().Owner, "the store still holds our owner")
	require.True(t, l.Deadline().After(start.Add(3*ttl/2)), "the trust window moved forward with the renewals")
	require.NoError(t, l.Release(ctx))
}

func deletedKeyIsLost(t *testing.T, e *env) {
	ctx := context.Background()
	name := "deleted"
	c := e.client(t)
	const ttl = 3 * time.Second // renewed every second, long before the window ends
	a, err := c.TryAcquire(ctx, name, ttl)
	require.NoError(t, err)
	held(t, a)
	require.NoError(t, e.Expire(ctx, name))
	b, err := c.TryAcquire(ctx, name, longTTL)
	require.NoError(t, err, "the key is free for a new acquirer at once")
	held(t, b)
	testwait.Done(t, a.Done(), limit, "loss of the deleted lease")
	require.ErrorIs(t, a.Err(), lease.ErrNotHeld)
	require.ErrorIs(t, a.Release(ctx), lease.ErrNotHeld)
	require.NoError(t, b.Err())
	e.requireOwner(t, name, b.Holder().Owner, "the old holder's renew and release leave the new one alone")
	require.Greater(t, b.Token(), a.Token())
	require.NoError(t, b.Release(ctx))
}

// unrenewedLeaseIsFreedAfterItsTTL: a lease nobody renews (its holder
// frozen) is freed by the store once its TTL passes, without Expire, and
// the next holder gets a larger token.
func unrenewedLeaseIsFreed(t *testing.T, e *env) {
	if e.NoExpiry {
		t.Skip("leasetest: skipped: the Store has NoExpiry")
	}
	ctx := context.Background()
	name := "unrenewed"
	c, other := e.client(t), e.client(t)
	const ttl = 300 * time.Millisecond
	start := time.Now()
	a := held(t, leasetest.TryAcquire(t, c, name, ttl))
	leasetest.Freeze(a)
	var b *lease.Lease
	testwait.Until(t, limit, "the unrenewed lease is freed", func() bool {
		l, err := other.TryAcquire(ctx, name, longTTL)
		if err != nil {
			require.ErrorIs(t, err, lease.ErrNotAcquired)
			return false
		}
		b = held(t, l)
		return true
	})
	require.GreaterOrEqual(t, time.Since(start), ttl-leasedriver.Drift(ttl), "freed before its TTL")
	require.Greater(t, b.Token(), a.Token())
	e.requireOwner(t, name, b.Holder().Owner, "the new holder is stored")
	leasetest.Thaw(a)
	testwait.Done(t, a.Done(), limit, "loss of the thawed holder")
	require.ErrorIs(t, a.Err(), lease.ErrExpired)
	require.NoError(t, b.Release(ctx))
}

func lifetimeEndLoses(t *testing.T, e *env) {
	name := "lifetime"
	c := e.client(t)
	app, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := c.TryAcquire(context.Background(), name, longTTL, lease.WithLifetime(app))
	require.NoError(t, err)
	held(t, l)
	cancel()
	testwait.Done(t, l.Done(), limit, "loss after the lifetime context ended")
	require.ErrorIs(t, l.Err(), lease.ErrParentDone)
	require.ErrorIs(t, l.Err(), context.Canceled, "the lifetime context's cause is joined")
	// The lease is freed on its behalf, long before its TTL runs out.
	var l2 *lease.Lease
	testwait.Until(t, limit, "lease freed", func() bool {
		l2, err = c.TryAcquire(context.Background(), name, longTTL)
		if err == nil {
			held(t, l2)
		}
		return err == nil
	})
	require.Greater(t, l2.Token(), l.Token())
	// Release still returns nil: the lease was released on its behalf.
	require.NoError(t, l.Release(context.Background()))
	require.NoError(t, l2.Release(context.Background()))
}

// acquireContextBoundsOnlyTheWait: the lease outlives the context of the
// call that took it, for both TryAcquire and a blocked Acquire, and keeps
// its values.
func acquireContextBoundsOnlyTheWait(t *testing.T, e *env) {
	type key struct{}
	name := "wait-bound"
	c := e.client(t)
	call, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	l, err := c.TryAcquire(call, name, longTTL)
	require.NoError(t, err)
	held(t, l)

	// A blocked Acquire under a deadline, woken by l's release.
	wait, cancelWait := context.WithTimeout(context.Background(), limit)
	defer cancelWait()
	type result struct {
		l   *lease.Lease
		err error
	}
	waiter := e.client(t)
	got := make(chan result, 1)
	go func() {
		l2, err := waiter.Acquire(wait, name, longTTL)
		got <- result{l2, err}
	}()
	cancel() // the call's context ends: l lives on
	e.requireOwner(t, name, l.Holder().Owner, "the key still holds the first owner")
	require.NoError(t, l.Err())
	require.NoError(t, l.Context().Err())
	require.Equal(t, "v", l.Context().Value(key{}), "the lease context keeps the call's values")
	require.NoError(t, l.Renew(context.Background()), "a lease whose call context ended renews")
	require.NoError(t, l.Release(context.Background()))

	r := <-got // wait's deadline bounds it
	require.NoError(t, r.err, "the waiter gets the released lease")
	l2 := held(t, r.l)
	cancelWait()
	require.NoError(t, l2.Renew(context.Background()), "the waiter's lease outlives its wait's context")
	require.NoError(t, l2.Err())
	e.requireOwner(t, name, l2.Holder().Owner, "the waiter holds it")
	require.NoError(t, l2.Release(context.Background()))
}

func waiterIsWokenByRelease(t *testing.T, e *env) {
	if e.NoReleaseNotification {
		t.Skip("leasetest: skipped: the Store has NoReleaseNotification")
	}
	ctx := context.Background()
	name := "waiter"
	holder, err := e.client(t).TryAcquire(ctx, name, longTTL)
	require.NoError(t, err)
	held(t, holder)

	// The waiter retries only after a minute: within the check's limit,
	// only the release notification can wake it.
	obs := &acquireCounter{}
	waiter := e.client(t, func(o *lease.Options) {
		o.Observer = obs
		o.RetryMin, o.RetryMax = time.Minute, time.Minute
	})
	wctx, cancel := context.WithTimeout(ctx, 2*limit)
	defer cancel()
	type result struct {
		l   *lease.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := waiter.Acquire(wctx, name, longTTL)
		got <- result{l, err}
	}()
	// Its second attempt follows its subscription to the release.
	testwait.Until(t, limit, "waiter subscribed and tried again", func() bool {
		return obs.get("held") >= 2
	})
	released := time.Now()
	require.NoError(t, holder.Release(ctx))
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case r := <-got:
		require.NoError(t, r.err)
		held(t, r.l)
		require.Less(t, time.Since(released), limit)
		require.Greater(t, r.l.Token(), holder.Token())
		require.Equal(t, 1, obs.get("acquired"))
		require.NoError(t, r.l.Release(ctx))
	case <-timer.C:
		cancel()
		<-got
		t.Fatalf("waiter not woken by the release within %v", limit)
	}
}

func acquireGivesUp(t *testing.T, e *env) {
	ctx := context.Background()
	name := "gives-up"
	c := e.client(t)
	holder, err := c.TryAcquire(ctx, name, longTTL)
	require.NoError(t, err)
	held(t, holder)
	// Long enough for a first attempt to answer on a loaded machine.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	l, err := c.Acquire(short, name, longTTL)
	require.Nil(t, l)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the context's error is kept")
	require.ErrorIs(t, err, lease.ErrNotAcquired, "joined with the last attempt's")
	e.requireOwner(t, name, holder.Holder().Owner, "the holder keeps the lease")
	require.NoError(t, holder.Release(ctx))
}

func badInputGetsTypedErrors(t *testing.T, e *env) {
	ctx := context.Background()
	c := e.client(t)
	var before int64
	if e.Commands != nil {
		before = e.Commands()
	}
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		want error
	}{
		{"", longTTL, lease.ErrInvalidName},
		{strings.Repeat("x", leasedriver.MaxNameLen+1), longTTL, lease.ErrInvalidName},
		{"a{b}", longTTL, lease.ErrInvalidName},
		{"a}b", longTTL, lease.ErrInvalidName},
		{"job", 0, lease.ErrInvalidTTL},
		{"job", -time.Second, lease.ErrInvalidTTL},
		{"job", leasedriver.MinTTL - 1, lease.ErrInvalidTTL},
	} {
		l, err := c.TryAcquire(ctx, tc.name, tc.ttl)
		require.ErrorIs(t, err, tc.want, "TryAcquire(%q, %v)", tc.name, tc.ttl)
		require.Nil(t, l)
		l, err = c.Acquire(ctx, tc.name, tc.ttl)
		require.ErrorIs(t, err, tc.want, "Acquire(%q, %v)", tc.name, tc.ttl)
		require.Nil(t, l)
	}
	if e.Commands != nil {
		require.Equal(t, before, e.Commands(), "bad input is refused before any command")
	}

	var none *lease.Lease
	require.ErrorIs(t, none.Err(), lease.ErrLost)
	require.ErrorIs(t, none.Release(ctx), lease.ErrNotHeld)
	require.Equal(t, fence.None, none.Token())
}

func frozenHolderIsLost(t *testing.T, e *env) {
	ctx := context.Background()
	name := "frozen"
	c := e.client(t)
	const ttl = 300 * time.Millisecond
	a := held(t, leasetest.TryAcquire(t, c, name, ttl))
	leasetest.Freeze(a)
	testwait.Until(t, limit, "a's trust window passes", func() bool { return time.Now().After(a.Deadline()) })
	require.NoError(t, a.Err(), "a frozen holder still believes it holds the lease")

	require.NoError(t, e.Expire(ctx, name))
	b, err := c.TryAcquire(ctx, name, longTTL)
	require.NoError(t, err)
	held(t, b)
	require.Greater(t, b.Token(), a.Token())

	leasetest.Thaw(a)
	testwait.Done(t, a.Done(), limit, "loss of the thawed holder")
	require.ErrorIs(t, a.Err(), lease.ErrExpired, "its window passed while frozen")
	require.ErrorIs(t, a.Release(ctx), lease.ErrNotHeld)
	require.NoError(t, b.Err())
	e.requireOwner(t, name, b.Holder().Owner, "the thawed holder leaves the new one alone")
	require.NoError(t, b.Release(ctx))
}

// tryAcquireAllAnswersEachName: a batch takes the free leases, reports the
// held and the invalid ones, and each lease it gave is an ordinary lease.
// Names spread over many hash slots, so a Cluster splits the batch.
func tryAcquireAllAnswersEachName(t *testing.T, e *env) {
	ctx := context.Background()
	c, other := e.client(t), e.client(t)
	taken, err := other.TryAcquire(ctx, "batch-held", longTTL)
	require.NoError(t, err)
	defer func() { require.NoError(t, taken.Release(ctx)) }()
	earlier, err := c.TryAcquire(ctx, "batch-3", longTTL)
	require.NoError(t, err)
	require.NoError(t, earlier.Release(ctx))

	names := []string{"batch-held", ""}
	for i := range 8 {
		names = append(names, fmt.Sprintf("batch-%d", i))
	}
	leases, errs := c.TryAcquireAll(ctx, names, longTTL)
	require.Len(t, leases, len(names))
	require.Len(t, errs, len(names))
	require.ErrorIs(t, errs[0], lease.ErrNotAcquired)
	require.Nil(t, leases[0])
	require.ErrorIs(t, errs[1], lease.ErrInvalidName)
	owners := map[string]bool{}
	for i := 2; i < len(names); i++ {
		require.NoError(t, errs[i], "%s", names[i])
		l := leases[i]
		held(t, l)
		require.False(t, owners[l.Holder().Owner], "an owner per lease")
		owners[l.Holder().Owner] = true
		if e.Inspect != nil {
			owner, _, err := e.Inspect(ctx, names[i])
			require.NoError(t, err)
			require.Equal(t, l.Holder().Owner, owner, "%s is stored as held", names[i])
		}
		// Held: nobody else gets it.
		_, err := other.TryAcquire(ctx, names[i], longTTL)
		require.ErrorIs(t, err, lease.ErrNotAcquired, "%s", names[i])
	}
	require.Greater(t, leases[5].Token(), earlier.Token(), "a token above the name's earlier ones")
	for i := 2; i < len(names); i++ {
		require.NoError(t, leases[i].Release(ctx))
	}
	_, errs = c.TryAcquireAll(ctx, []string{"batch-x"}, 0)
	require.ErrorIs(t, errs[0], lease.ErrInvalidTTL)
}

// The holder label (Options.Holder) is stored with each acquisition, by
// TryAcquire and TryAcquireAll alike, and is always the current
// holder's: a later holder without a label shows none, not its
// predecessor's.
func holderLabelIsStored(t *testing.T, e *env) {
	if e.HolderLabel == nil {
		t.Skip("leasetest: the Store has no HolderLabel")
	}
	ctx := context.Background()
	label := func(name string) string {
		t.Helper()
		got, err := e.HolderLabel(ctx, name)
		require.NoError(t, err)
		return got
	}
	a := e.client(t, func(o *lease.Options) { o.Holder = "replica-a" })
	b := e.client(t, func(o *lease.Options) { o.Holder = "replica-b 🛰" })
	none := e.client(t)
	require.Equal(t, "replica-a", holderLabelOf(a), "the Client's label is its backend's")
	require.Equal(t, "", holderLabelOf(none))

	name := "labelled"
	l := held(t, leasetest.TryAcquire(t, a, name, longTTL))
	require.Equal(t, "replica-a", label(name), "the holder's label")
	require.NoError(t, l.Release(ctx))
	l = held(t, leasetest.TryAcquire(t, b, name, longTTL))
	require.Equal(t, "replica-b 🛰", label(name), "the next holder's label")
	require.NoError(t, l.Release(ctx))
	l = held(t, leasetest.TryAcquire(t, none, name, longTTL))
	require.Equal(t, "", label(name), "a holder without a label shows none, not the one before")
	require.NoError(t, l.Release(ctx))

	names := []string{"batch-1", "batch-2"}
	leases, errs := a.TryAcquireAll(ctx, names, longTTL)
	for i := range names {
		require.NoError(t, errs[i])
		held(t, leases[i])
		require.Equal(t, "replica-a", label(names[i]), "TryAcquireAll stores the label of %s", names[i])
	}
}

// holderLabelOf returns the holder label c's backend stores (Labeled), ""
// when none.
func holderLabelOf(c *lease.Client) string {
	if lb, ok := leasejoin.Backend(c).(leasedriver.Labeled); ok {
		return lb.HolderLabel()
	}
	return ""
}
