package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease"
)

// acquisition is one lease a holder got, with what happened to it.
type acquisition struct {
	token    fence.Token
	owner    string
	acquired time.Time // Acquire returned
	lost     time.Time // the holder observed the end of l.Context()
	deadline time.Time // the trust window's end when it did
	expired  bool      // lost to the fault (trust window passed, key gone), not released
}

// signalSlack is how late after the trust window's end a holder may
// observe its loss before it counts as signalled late: the timer fires at
// the deadline, and a test process on a busy machine (-race, other
// tests) runs it that much later at worst.
const signalSlack = 250 * time.Millisecond

// pauseCounts are a trial's figures.
type pauseCounts struct {
	dups, stale, late, acquisitions, expired int
	// successorFirst counts successors whose Acquire returned before the
	// holder before them observed its loss. The drift (12 ms at a 1 s
	// TTL) is all that separates the two when Redis expires the key on
	// time, so a test process starved for longer shows it; the fence is
	// what keeps it safe (stale_accepted).
	successorFirst int
	maxDelay       time.Duration
	// lost is 1 when a holder lost its lease to the pause in the trial;
	// lateAttempted 1 when a holder that had lost its lease wrote after a
	// successor's write was accepted, lateRefused 1 when the sink refused
	// every such write.
	lost, lateAttempted, lateRefused int
}

func (c *pauseCounts) add(o pauseCounts) {
	c.dups += o.dups
	c.stale += o.stale
	c.late += o.late
	c.acquisitions += o.acquisitions
	c.expired += o.expired
	c.successorFirst += o.successorFirst
	c.maxDelay = max(c.maxDelay, o.maxDelay)
	c.lost += o.lost
	c.lateAttempted += o.lateAttempted
	c.lateRefused += o.lateRefused
}

// pauseTrial is one run of three competing holders while Redis stops.
type pauseTrial struct {
	s       *sink
	pool    *pgxpool.Pool
	clients []*lease.Client
	lname   string
	res     string
	guarded bool
	ttl     time.Duration
	hold    func() time.Duration // how long a holder keeps a lease it is not losing

	mu   sync.Mutex
	acqs []*acquisition
	ev   chan string // "acquired", "released": what the pauser waits for
	// top is the greatest token of a write the sink accepted; late and
	// lateRefused count the writes of holders that had lost their lease
	// made after a greater token was accepted (known before the write,
	// or shown by its refusal), and those refused.
	top               fence.Token
	late, lateRefused int
}

// holderLoop acquires, writes every 25 ms while it holds (p.hold), and
// releases, until stop ends. A holder that loses its lease goes on
// writing with its old token, as in-flight work does, for up to 4 s or
// until the sink refuses it.
func (p *pauseTrial) holderLoop(stop context.Context, c *lease.Client, id int) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	wait := func() bool {
		select {
		case <-tick.C:
			return true
		case <-stop.Done():
			return false
		}
	}
	for stop.Err() == nil {
		l, err := acquire(stop, c, p.lname, p.ttl)
		if err != nil {
			if !wait() {
				return nil
			}
			continue // Redis stopped: the acquire timed out
		}
		a := &acquisition{token: l.Token(), owner: l.Holder().Owner, acquired: time.Now()}
		context.AfterFunc(l.Context(), func() {
			p.mu.Lock()
			a.lost, a.deadline = time.Now(), l.Deadline()
			cause := context.Cause(l.Context())
			a.expired = errors.Is(cause, lease.ErrExpired) || errors.Is(cause, lease.ErrNotHeld)
			p.mu.Unlock()
		})
		p.mu.Lock()
		p.acqs = append(p.acqs, a)
		p.mu.Unlock()
		p.signal("acquired")

		h := holderOf(l)
		holdUntil := time.Now().Add(p.hold())
		var lostSeen time.Time // when this loop first saw l.Err()
		n := 0
		for wait() {
			if l.Err() != nil && lostSeen.IsZero() {
				lostSeen = time.Now()
			}
			if l.Err() == nil && time.Now().After(holdUntil) {
				break
			}
			if !lostSeen.IsZero() && time.Since(lostSeen) > 4*time.Second {
				break
			}
			n++
			p.mu.Lock()
			late := l.Err() != nil && p.top > h.Token // a successor wrote: this write is stale
			p.mu.Unlock()
			err := p.s.write(stop, p.pool, p.res, h, fmt.Sprintf("h%d-%d", id, n), p.guarded)
			p.mu.Lock()
			if err == nil {
				p.top = max(p.top, h.Token)
			}
			// A refusal shows a greater token was accepted first, even
			// one whose writer had not returned when this write began.
			if (late && err == nil) || isStale(err) {
				p.late++
				if isStale(err) {
					p.lateRefused++
				}
			}
			p.mu.Unlock()
			if isStale(err) {
				break
			}
			if err != nil && stop.Err() == nil {
				return fmt.Errorf("holder %d: write: %w", id, err)
			}
		}
		if l.Err() == nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(stop), time.Second)
			_ = l.Release(rctx) // may time out while Redis is stopped
			cancel()
			p.signal("released")
		}
	}
	return nil
}

func (p *pauseTrial) signal(ev string) {
	select {
	case p.ev <- ev:
	default:
	}
}

// TestRedisSIGSTOPedDuringAcquireAndRenew: three holders with clients of
// their own compete for one lease and write through pgfence; Redis is
// SIGSTOPed for a random 1.5-3.5 s, longer than the 1 s TTL, right after
// an acquire (the holder will renew: it loses the lease) in three trials
// of four, right after a release (the others are acquiring) in the
// fourth. A holder that lost its lease goes on writing with its old token
// until the sink refuses it, so once a successor has written after
// Redis came back, its late writes must be refused. Counted: two
// acquisitions with one token, accepted writes the fence rule refuses,
// and losses a holder observed more than signalSlack after its trust
// window ended; lost_the_lease counts the trials in which a holder lost
// its lease to the pause, late_write_attempted those in which such a
// holder wrote after a successor's write, refused those in which the sink
// refused every such write.
// Control: the sink without its fence check, with a pause long enough to
// lose the lease (1.5-3 s) while it is held.
func TestRedisSIGSTOPedDuringAcquireAndRenew(t *testing.T) {
	t.Parallel()
	const name = "redis-pause"
	n := trials(100)
	r := newReport(name, n, controls(n))
	s, pool := newSink(t, "chaos_pause_")
	srv := redisproc.Start(t)
	var clients []*lease.Client
	for range 3 {
		c, err := lease.New(srv.Client(t, fastClient), lease.Options{Prefix: "chaos:", RetryMax: 50 * time.Millisecond})
		require.NoError(t, err)
		clients = append(clients, c)
	}
	bar := newProgress(name, n+r.controls)

	var total pauseCounts
	renewing := 0 // trials that pause right after an acquire
	for i := range n + r.controls {
		control := i >= n
		pause := time.Duration(1500+rand.N(2000)) * time.Millisecond
		p := &pauseTrial{s: s, pool: pool, clients: clients, lname: fmt.Sprintf("pause-%d", i),
			res: fmt.Sprintf("pause-%d", i), guarded: !control, ttl: time.Second, ev: make(chan string, 16),
			// A holder keeps its lease past the pause unless it loses it.
			hold: func() time.Duration { return pause + time.Duration(1000+rand.N(1000))*time.Millisecond }}
		mode := "acquired"
		if i%4 == 3 {
			mode = "released"
		}
		if control {
			mode, pause = "acquired", time.Duration(1500+rand.N(1500))*time.Millisecond
			p.hold = func() time.Duration { return 5 * time.Second }
		}
		c := runPauseTrial(t, srv, p, mode, pause)
		t.Logf("trial %d: %s, pause %v: lost %d, late writes %d (refused %d), acquisitions %d", i, mode, pause, c.lost, p.late, p.lateRefused, c.acquisitions)
		if control {
			if c.stale > 0 {
				r.fired++
			}
		} else {
			total.add(c)
			if mode == "acquired" {
				renewing++
			}
		}
		bar.step()
	}
	r.violations = total.dups + total.stale + total.late + (total.lateAttempted - total.lateRefused)
	r.add("duplicate_tokens", total.dups)
	r.add("stale_accepted", total.stale)
	r.add("loss_signalled_late", total.late)
	r.add("acquisitions", total.acquisitions)
	r.add("lost_to_pause", total.expired)
	r.ratio("lost_the_lease", total.lost, n)
	r.ratio("late_write_attempted", total.lateAttempted, n)
	r.ratio("refused", total.lateRefused, total.lateAttempted)
	r.add("max_signal_delay", total.maxDelay.Round(time.Millisecond))
	r.add("successor_before_signal", total.successorFirst)
	r.finish(t)
	require.GreaterOrEqual(t, total.lost, mostTrials(renewing), "the holder loses its lease in every trial that pauses a renewing holder but 5%% (at least one)")
	require.GreaterOrEqual(t, total.lateAttempted, mostTrials(renewing), "late writes attempted in every trial that pauses a renewing holder but 5%% (at least one)")
}

// runPauseTrial runs the holders, stops Redis for pause at the first event
// mode after a random offset, and returns the trial's counts.
func runPauseTrial(t *testing.T, srv *redisproc.Server, p *pauseTrial, mode string, pause time.Duration) (c pauseCounts) {
	t.Helper()
	stop, cancel := context.WithCancel(context.Background())
	errs := make(chan error, len(p.clients))
	for id, c := range p.clients {
		go func() { errs <- p.holderLoop(stop, c, id) }()
	}
	offset := time.NewTimer(time.Duration(50+rand.N(550)) * time.Millisecond)
	<-offset.C
	limit := time.NewTimer(10 * time.Second)
	for waiting := true; waiting; {
		select {
		case ev := <-p.ev:
			waiting = ev != mode
		case <-limit.C:
			cancel()
			t.Fatalf("no %q event within 10 s", mode)
		}
	}
	limit.Stop()
	srv.Pause(t)
	held := time.NewTimer(pause)
	<-held.C
	srv.Resume(t)
	after := time.NewTimer(1500 * time.Millisecond)
	<-after.C
	cancel()
	for range p.clients {
		require.NoError(t, <-errs)
	}

	p.mu.Lock()
	acqs := slices.Clone(p.acqs)
	p.mu.Unlock()
	// The AfterFuncs of the last leases run as the holders return.
	slices.SortFunc(acqs, func(a, b *acquisition) int { return cmp.Compare(a.token, b.token) })
	owners := map[fence.Token]string{}
	for k, a := range acqs {
		if o, ok := owners[a.token]; ok && o != a.owner {
			c.dups++
		}
		owners[a.token] = a.owner
		p.mu.Lock()
		if a.expired {
			c.expired++
		}
		p.mu.Unlock()
		p.mu.Lock()
		lostAt, deadline := a.lost, a.deadline
		p.mu.Unlock()
		// An acquire answered after its trust window ended (sent while
		// Redis was stopped) is lost as it returns: count from then.
		due := deadline
		if a.acquired.After(due) {
			due = a.acquired
		}
		if !lostAt.IsZero() && lostAt.After(due) {
			c.maxDelay = max(c.maxDelay, lostAt.Sub(due))
			if lostAt.Sub(due) > signalSlack {
				c.late++
				t.Logf("%s: token %d observed its loss %v after its trust window ended", p.lname, a.token, lostAt.Sub(due))
			}
		}
		if k > 0 {
			prev := acqs[k-1]
			p.mu.Lock()
			prevLost := prev.lost
			p.mu.Unlock()
			if !prevLost.IsZero() && a.acquired.Before(prevLost) {
				c.successorFirst++
				t.Logf("%s: token %d acquired %v before token %d observed its loss", p.lname, a.token, prevLost.Sub(a.acquired), prev.token)
			}
		}
	}
	es, err := p.s.effects(context.Background(), p.pool, p.res)
	require.NoError(t, err)
	c.stale, c.acquisitions = staleAccepted(es), len(acqs)
	if c.expired > 0 {
		c.lost = 1
	}
	p.mu.Lock()
	if p.late > 0 {
		c.lateAttempted = 1
		if p.lateRefused == p.late {
			c.lateRefused = 1
		}
	}
	p.mu.Unlock()
	return c
}
