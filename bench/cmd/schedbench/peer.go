package main

import (
	"context"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
)

// The peer is the scheduler a Go user would pick instead: go-co-op/gocron
// v2 on every replica, with a distributed Locker on bsm/redislock, as its
// documentation shows. gocron keys the lock by job name only, so a replica
// whose timer fires after another replica's run ended finds the lock free
// and runs the same slot again: the replicas' clocks are skewed by
// peerSkews, and the duplicates are counted from the job side.

// peerSkews are the replicas' clock offsets (0, +300 ms, -300 ms).
var peerSkews = []time.Duration{0, 300 * time.Millisecond, -300 * time.Millisecond}

// skewedClock is the real clock read skew ahead: a replica whose clock
// runs ahead fires early in real time, one behind fires late.
type skewedClock struct {
	clockwork.Clock
	skew time.Duration
}

func (c skewedClock) Now() time.Time                  { return time.Now().Add(c.skew) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// redisLocker is gocron's Locker on bsm/redislock: one lock per key (the
// job name), held for ttl at most, released when the run ends.
type redisLocker struct {
	c      *redislock.Client
	prefix string
	ttl    time.Duration
}

func (l redisLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	lk, err := l.c.Obtain(ctx, l.prefix+key, l.ttl, nil)
	if err != nil {
		return nil, err
	}
	return redisLock{lk}, nil
}

type redisLock struct{ l *redislock.Lock }

func (l redisLock) Unlock(ctx context.Context) error { return l.l.Release(ctx) }

// runPeer runs jobs one-time jobs, all due at the same second, on
// replicas gocron schedulers with skewed clocks, and prints the peer's
// line. The lag of a run is measured on its replica's own clock (the
// replica's view of how late it ran the slot).
func runPeer(t target, jobs, replicas int) error {
	prefix := fmt.Sprintf("holdfast-schedbench-peer:%d:", time.Now().UnixNano())
	defer t.cleanup(prefix)
	start := time.Now().Truncate(time.Second).Add((4*time.Second + time.Duration(jobs)*200*time.Microsecond).Round(time.Second))
	rec := newRecorder(jobs)
	var scheds []gocron.Scheduler
	var clients []interface{ Close() error }
	defer func() {
		for _, s := range scheds {
			_ = s.Shutdown()
		}
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	for i := range replicas {
		rdb := t.client(256)
		clients = append(clients, rdb)
		clk := skewedClock{Clock: clockwork.NewRealClock(), skew: peerSkews[i%len(peerSkews)]}
		s, err := gocron.NewScheduler(
			gocron.WithClock(clk),
			gocron.WithDistributedLocker(redisLocker{c: redislock.New(rdb), prefix: prefix, ttl: 10 * time.Second}),
		)
		if err != nil {
			return err
		}
		scheds = append(scheds, s)
		for j := range jobs {
			name := fmt.Sprintf("job%05d", j)
			_, err := s.NewJob(
				gocron.OneTimeJob(gocron.OneTimeJobStartDateTime(start)),
				gocron.NewTask(func() { rec.add(name, clk.Since(start)) }),
				gocron.WithName(name),
			)
			if err != nil {
				return err
			}
		}
		s.Start()
	}
	// A run whose lock call failed on every replica (redislock's answer
	// came too late, the pool was exhausted) never comes: wait for every
	// job, or a quiet spell once the slot passed. The late replica's runs
	// come up to 300 ms (its skew) after the others'.
	<-time.After(time.Until(start.Add(time.Second)))
	select {
	case <-rec.all:
	case <-rec.quietCh(2*time.Second, time.Now().Add(time.Minute)):
	}
	rec.quiet(500*time.Millisecond, time.Now().Add(10*time.Second))
	slots, runs, dups, p50, p99 := rec.figures()
	fmt.Printf("bench: scheduler_peer gocron slots=%d replicas=%d skew_ms=0,+300,-300 lag_p50_ms=%.1f lag_p99_ms=%.1f runs=%d duplicates=%d missed=%d\n",
		jobs, replicas, p50, p99, runs, dups, jobs-slots)
	return nil
}
