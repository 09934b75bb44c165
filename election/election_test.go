package election_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/election"
	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasetest"
)

// setup is the per-test bundle: one Redis, a key prefix of the test's own,
// and the election name every candidate uses.
type setup struct {
	rdb    redis.UniversalClient
	prefix string
	name   string
}

// candidate is one process taking part: its own lease Client and Election.
type candidate struct {
	client *lease.Client
	e      *election.Election
}

func (s *setup) candidate(t *testing.T, ttl time.Duration) *candidate {
	t.Helper()
	c, err := lease.New(s.rdb, lease.Options{Prefix: s.prefix})
	require.NoError(t, err)
	e, err := election.New(c, s.name, election.Options{TTL: ttl})
	require.NoError(t, err)
	return &candidate{client: c, e: e}
}

// eachBackend runs fn against real Redis and miniredis.
func eachBackend(t *testing.T, fn func(t *testing.T, s *setup)) {
	t.Helper()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			fn(t, &setup{rdb: rdb, prefix: redistest.Prefix(t, rdb), name: "leader"})
		})
	}
}

// eachExpiringBackend runs fn against real Redis and a miniredis whose
// clock follows the wall clock: on both, keys expire by themselves.
func eachExpiringBackend(t *testing.T, fn func(t *testing.T, s *setup)) {
	t.Helper()
	for _, b := range []redistest.Backend{
		{Name: "redis", New: redistest.Real},
		{Name: "miniredis-driven-clock", New: func(t testing.TB) redis.UniversalClient {
			rdb, mr := leasetest.NewMiniredisClient(t)
			leasetest.DriveClock(t, mr)
			return rdb
		}},
	} {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			fn(t, &setup{rdb: rdb, prefix: redistest.Prefix(t, rdb), name: "leader"})
		})
	}
}

// campaign runs Campaign in a goroutine; the result arrives on the
// returned channel. The campaign ends with the test.
type result struct {
	ld  *election.Leadership
	err error
}

func campaign(t *testing.T, c *candidate, value string) <-chan result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan result, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ld, err := c.e.Campaign(ctx, value)
		ch <- result{ld, err}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		select {
		case r := <-ch:
			_ = r.ld.Resign(context.Background())
		default: // the test took the result and resigns itself
		}
	})
	return ch
}

func elected(t *testing.T, ch <-chan result, what string) *election.Leadership {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case r := <-ch:
		require.NoError(t, r.err, what)
		t.Cleanup(func() { _ = r.ld.Resign(context.Background()) })
		return r.ld
	case <-timer.C:
		t.Fatalf("%s: not elected within 10s", what)
		return nil
	}
}

// requireLeader checks that e reports ld as the leader.
func requireLeader(t *testing.T, e *election.Election, ld *election.Leadership) {
	t.Helper()
	got, err := e.Leader(context.Background())
	require.NoError(t, err)
	require.Equal(t, election.Leader{Value: ld.Value(), Token: ld.Token(), OwnerID: ld.OwnerID(), Scope: e.Name()}, got)
	require.Equal(t, fence.Holder{Scope: e.Name(), Token: ld.Token(), Owner: ld.Holder().Owner}, ld.Holder(), "the leader presents its lease's holder")
	require.Equal(t, fence.OwnerID(ld.Holder().Owner), got.OwnerID)
	requireNoOwner(t, ld.Holder().Owner, got)
}

// A *Leadership formats its value, token and owner id, never the owner
// (a fresh user's trial found %s of one printing it).
func TestLeadershipNeverFormatsItsOwner(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		a := s.candidate(t, time.Minute)
		ld := elected(t, campaign(t, a, "host-a:8080"), "a")
		owner, id := ld.Holder().Owner, ld.OwnerID()
		require.Equal(t, fence.OwnerID(owner), id)
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%X"} {
			for _, v := range []any{ld, []*election.Leadership{ld}, ld.Context()} {
				require.NotContains(t, fmt.Sprintf(verb, v), owner, "%s of %T", verb, v)
			}
			require.Contains(t, fmt.Sprintf(verb, ld), id, verb)
			require.Contains(t, fmt.Sprintf(verb, ld), "host-a:8080", verb)
		}
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "leadership", ld)
		require.NotContains(t, buf.String(), owner)
		require.Contains(t, buf.String(), `"owner_id":"`+id+`"`)
	})
}

// requireNoOwner checks that an observer's view of the leader, however
// printed, does not carry the leader's owner: with the token it is what a
// sink accepts as the leader's write (docs/security.md).
func requireNoOwner(t *testing.T, owner string, got election.Leader) {
	t.Helper()
	require.NotEmpty(t, owner)
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		require.NotContains(t, fmt.Sprintf(f, got), owner, f)
	}
}

func TestOneOfTwoCandidatesLeadsAndResignElectsTheOther(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		a, b := s.candidate(t, time.Minute), s.candidate(t, time.Minute)
		ra, rb := campaign(t, a, "a"), campaign(t, b, "b")

		// Exactly one wins; the other keeps campaigning.
		var first *election.Leadership
		var other <-chan result
		var otherC *candidate
		timer := time.NewTimer(10 * time.Second)
		defer timer.Stop()
		select {
		case r := <-ra:
			require.NoError(t, r.err)
			first, other, otherC = r.ld, rb, b
		case r := <-rb:
			require.NoError(t, r.err)
			first, other, otherC = r.ld, ra, a
		case <-timer.C:
			t.Fatal("no candidate elected")
		}
		t.Cleanup(func() { _ = first.Resign(context.Background()) })
		requireLeader(t, a.e, first)
		requireLeader(t, b.e, first)
		select {
		case r := <-other:
			t.Fatalf("two leaders: %v, %v", first.Value(), r.ld.Value())
		default:
		}
		require.NoError(t, first.Err())

		require.NoError(t, first.Resign(context.Background()))
		require.NoError(t, first.Resign(context.Background()), "Resign is idempotent")
		require.ErrorIs(t, context.Cause(first.Context()), lease.ErrReleased)
		second := elected(t, other, "the other candidate after Resign")
		require.Greater(t, second.Token(), first.Token())
		requireLeader(t, otherC.e, second)
		requireLeader(t, a.e, second)
	})
}

func TestForceExpiredLeaderLosesAndTheOtherIsElected(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		const ttl = 2 * time.Second // renewed every 667 ms, long before the window ends
		a := s.candidate(t, ttl)
		first := elected(t, campaign(t, a, "a"), "a")
		b := s.candidate(t, ttl)
		rb := campaign(t, b, "b")

		require.NoError(t, leasetest.ForceExpire(context.Background(), s.rdb, a.client, s.name))
		second := elected(t, rb, "b after a's lease expired")
		testwait.Done(t, first.Done(), 5*time.Second, "a's term ends at its next renew")
		require.ErrorIs(t, first.Err(), lease.ErrNotHeld)
		require.Greater(t, second.Token(), first.Token())
		requireLeader(t, a.e, second)
		require.ErrorIs(t, first.Resign(context.Background()), lease.ErrNotHeld)
		requireLeader(t, a.e, second)
	})
}

func TestFrozenLeaderIsDeposedWhileItStillBelievesItLeads(t *testing.T) {
	t.Parallel()
	eachExpiringBackend(t, func(t *testing.T, s *setup) {
		// a's TTL is short, so that b takes over soon, but not so
		// short that a loaded host answers a's first acquisition past
		// its trust window (ErrSlowAcquire: 325 ms for a 300 ms TTL
		// was seen beside other packages' tests).
		a, b := s.candidate(t, time.Second), s.candidate(t, time.Minute)
		first := elected(t, campaign(t, a, "a"), "a")
		leasetest.Freeze(first.Lease())
		// a's key expires in Redis; b, retrying when a's TTL runs out,
		// takes over.
		second := elected(t, campaign(t, b, "b"), "b")
		require.Greater(t, second.Token(), first.Token())
		require.NoError(t, first.Err(), "frozen, a still believes it leads")
		requireLeader(t, a.e, second)
		leasetest.Thaw(first.Lease())
		testwait.Done(t, first.Done(), 5*time.Second, "a's term ends when thawed")
		require.ErrorIs(t, first.Err(), lease.ErrExpired)
	})
}

func TestLeaderAndObserveReflectTheCurrentLeader(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		a := s.candidate(t, time.Minute)
		_, err := a.e.Leader(ctx)
		require.ErrorIs(t, err, election.ErrNoLeader)

		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = a.e.Observe(short)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, election.ErrNoLeader)

		// An observer that would poll only once a minute: the
		// announcement wakes it.
		c, err := lease.New(s.rdb, lease.Options{Prefix: s.prefix})
		require.NoError(t, err)
		slow, err := election.New(c, s.name, election.Options{ObservePoll: 2 * time.Minute})
		require.NoError(t, err)
		observed := make(chan election.Leader, 1)
		octx, ocancel := context.WithTimeout(ctx, time.Minute)
		defer ocancel()
		go func() {
			ld, err := slow.Observe(octx)
			if err != nil {
				t.Error(err)
			}
			observed <- ld
		}()
		// The campaign may start before the observer subscribed: then
		// its first or second read finds the leader.
		ld := elected(t, campaign(t, a, "host-a:8080|weird:value"), "a")
		timer := time.NewTimer(10 * time.Second)
		defer timer.Stop()
		select {
		case got := <-observed:
			require.Equal(t, election.Leader{Value: "host-a:8080|weird:value", Token: ld.Token(), OwnerID: ld.OwnerID(), Scope: ld.Holder().Scope}, got)
			requireNoOwner(t, ld.Holder().Owner, got)
		case <-timer.C:
			ocancel()
			<-observed
			t.Fatal("Observe not woken by the election")
		}
		got, err := a.e.Observe(ctx)
		require.NoError(t, err, "with a leader, Observe returns at once")
		require.Equal(t, ld.Token(), got.Token)

		// The record outlives the lease, but a lost leader is not reported.
		require.NoError(t, leasetest.ForceExpire(ctx, s.rdb, a.client, s.name))
		_, err = a.e.Leader(ctx)
		require.ErrorIs(t, err, election.ErrNoLeader)
		require.NoError(t, ld.Err(), "a learns only at its next renew")
		require.ErrorIs(t, ld.Lease().Renew(ctx), lease.ErrNotHeld)
		require.ErrorIs(t, ld.Err(), lease.ErrNotHeld)
	})
}

func TestCampaignGivesUpWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		a, b := s.candidate(t, time.Minute), s.candidate(t, time.Minute)
		first := elected(t, campaign(t, a, "a"), "a")
		short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		ld, err := b.e.Campaign(short, "b")
		require.Nil(t, ld)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, lease.ErrNotAcquired)
		requireLeader(t, b.e, first)
	})
}

// A ctx that ended before the first try (or read) could tell keeps the
// documented errors: Campaign's matches lease.ErrNotAcquired, Observe's
// ErrNoLeader, with the lease free or held (a fresh user's trial: a
// shutdown that raced the call was not told apart from a Redis error).
func TestCampaignAndObserveWithAnEndedContext(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		a, b := s.candidate(t, time.Minute), s.candidate(t, time.Minute)
		ended, cancel := context.WithCancel(context.Background())
		cancel()
		ld, err := a.e.Campaign(ended, "a")
		require.Nil(t, ld)
		require.ErrorIs(t, err, context.Canceled, "lease free")
		require.ErrorIs(t, err, lease.ErrNotAcquired, "lease free")
		_, err = a.e.Observe(ended)
		require.ErrorIs(t, err, context.Canceled, "no leader")
		require.ErrorIs(t, err, election.ErrNoLeader, "no leader")

		first := elected(t, campaign(t, a, "a"), "a")
		ld, err = b.e.Campaign(ended, "b")
		require.Nil(t, ld)
		require.ErrorIs(t, err, context.Canceled, "lease held")
		require.ErrorIs(t, err, lease.ErrNotAcquired, "lease held")
		requireLeader(t, b.e, first)
	})
}

// Campaign's ctx bounds the wait only: a term won under a 300 ms
// deadline outlives it (issue 11, part 4).
func TestCampaignContextBoundsOnlyTheWait(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		a := s.candidate(t, time.Minute)
		wait, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		ld, err := a.e.Campaign(wait, "a")
		require.NoError(t, err)
		t.Cleanup(func() { _ = ld.Resign(context.Background()) })
		<-wait.Done()
		require.ErrorIs(t, wait.Err(), context.DeadlineExceeded)
		require.NoError(t, ld.Lease().Renew(context.Background()), "the term outlives the campaign's deadline")
		require.NoError(t, ld.Err())
		require.NoError(t, ld.Context().Err())
		requireLeader(t, a.e, ld)
	})
}

func TestCampaignLifetimeContextEndsTheTerm(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		a, b := s.candidate(t, time.Minute), s.candidate(t, time.Minute)
		app, cancel := context.WithCancel(context.Background())
		defer cancel()
		ld, err := a.e.Campaign(context.Background(), "a", lease.WithLifetime(app))
		require.NoError(t, err)
		t.Cleanup(func() { _ = ld.Resign(context.Background()) })
		rb := campaign(t, b, "b")
		cancel()
		testwait.Done(t, ld.Done(), 5*time.Second, "term ends with its lifetime context")
		require.ErrorIs(t, ld.Err(), lease.ErrParentDone)
		second := elected(t, rb, "b after a's lifetime ended")
		require.Greater(t, second.Token(), ld.Token())
	})
}

// A lease client on another backend keeps its own key layout, or none:
// the election refuses it rather than guessing keys.
func TestNewOnAnotherBackendIsRefused(t *testing.T) {
	t.Parallel()
	c, err := lease.NewWithBackend(otherBackend{}, lease.Options{})
	require.NoError(t, err)
	e, err := election.New(c, "leader", election.Options{})
	require.Nil(t, e)
	require.ErrorIs(t, err, election.ErrInvalidOptions)
	require.ErrorContains(t, err, "election_test.otherBackend")
}

// otherBackend is a leasedriver.Backend that is not the Redis one; New never
// calls it.
type otherBackend struct{}

func (otherBackend) Acquire(context.Context, string, string, time.Duration) (leasedriver.Grant, error) {
	return leasedriver.Grant{}, errors.New("not called")
}

func (otherBackend) Renew(_ context.Context, batch []leasedriver.Held) []error {
	return make([]error, len(batch))
}

func (otherBackend) Release(context.Context, leasedriver.Held) error { return nil }

func TestNewRejectsBadInput(t *testing.T) {
	t.Parallel()
	rdb := redistest.Mini(t)
	c, err := lease.New(rdb, lease.Options{})
	require.NoError(t, err)
	for _, tc := range []struct {
		c    *lease.Client
		name string
		opts election.Options
		want error
	}{
		{nil, "x", election.Options{}, election.ErrNilClient},
		{c, "", election.Options{}, lease.ErrInvalidName},
		{c, "a{b}", election.Options{}, lease.ErrInvalidName},
		{c, strings.Repeat("x", leasedriver.MaxNameLen+1), election.Options{}, lease.ErrInvalidName},
		{c, "x", election.Options{TTL: time.Millisecond}, lease.ErrInvalidTTL},
		{c, "x", election.Options{ObservePoll: -time.Second}, election.ErrInvalidOptions},
	} {
		e, err := election.New(tc.c, tc.name, tc.opts)
		require.Nil(t, e)
		require.True(t, errors.Is(err, tc.want), "New(%q, %+v) = %v, want %v", tc.name, tc.opts, err, tc.want)
	}
	// Options.Redis defaults to the lease client's.
	e, err := election.New(c, "x", election.Options{})
	require.NoError(t, err)
	require.NotNil(t, e)

	// Misuse is a typed error, never a panic.
	var nilCtx context.Context
	_, err = e.Leader(nilCtx)
	require.ErrorIs(t, err, lease.ErrNilContext)
	_, err = e.Observe(nilCtx)
	require.ErrorIs(t, err, lease.ErrNilContext)
	_, err = e.Campaign(nilCtx, "v")
	require.ErrorIs(t, err, lease.ErrNilContext)
	for name, bad := range map[string]*election.Election{"nil": nil, "zero": {}} {
		_, err = bad.Campaign(context.Background(), "v")
		require.ErrorIs(t, err, election.ErrNotCreated, name)
		_, err = bad.Leader(context.Background())
		require.ErrorIs(t, err, election.ErrNotCreated, name)
		_, err = bad.Observe(context.Background())
		require.ErrorIs(t, err, election.ErrNotCreated, name)
		require.Empty(t, bad.Name(), name)
	}

	var none *election.Leadership
	require.ErrorIs(t, none.Err(), lease.ErrLost)
	require.ErrorIs(t, none.Resign(context.Background()), lease.ErrNotHeld)
	require.Zero(t, none.Token())
	require.Empty(t, none.Value())
}

// On a Cluster, the lease key, the leader record and the channels share
// one hash tag: every script runs on one node.
func TestElectionOnCluster(t *testing.T) {
	t.Parallel()
	cluster := redisproc.StartCluster(t, 3)
	rdb := cluster.Client(t)
	s := &setup{rdb: rdb, prefix: "election-cluster:", name: "leader"}
	a, b := s.candidate(t, time.Minute), s.candidate(t, time.Minute)
	first := elected(t, campaign(t, a, "a"), "a")
	rb := campaign(t, b, "b")
	requireLeader(t, b.e, first)
	require.NoError(t, first.Resign(context.Background()))
	second := elected(t, rb, "b after a resigned")
	require.Greater(t, second.Token(), first.Token())
	got, err := a.e.Observe(context.Background())
	require.NoError(t, err)
	require.Equal(t, "b", got.Value)
}

// TestRedisCommandsNeverShowTheOwner: the text of every command a campaign
// sends (its lease's and the election's own), as redisotel's tracing hook
// records it (db.statement) and as a logging hook prints it, never holds
// the leader's owner: campaign (the lease and the announcement), resign.
func TestRedisCommandsNeverShowTheOwner(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		seen := redistest.RecordStatements(s.rdb)
		a := s.candidate(t, time.Minute)
		ld := elected(t, campaign(t, a, "host-a:8080"), "a")
		owner := ld.Holder().Owner
		require.NoError(t, ld.Resign(t.Context()))

		require.NotEmpty(t, owner)
		require.Empty(t, seen.Showing(owner), "a command shows the owner")
		require.Contains(t, seen.String(), "[owner]")
	})
}
