package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/faultproxy"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
)

// Environment of a scheduler worker: the slots' window, in Unix seconds.
const (
	envStart = "CHAOS_START"
	envEnd   = "CHAOS_END"
)

// The scheduler scenario's jobs: the effect job writes through pgfence
// and dedupes on the slot's idempotency key in the same transaction; the
// control job writes plainly.
const (
	guardedJob = "effect"
	controlJob = "control"
	schedTTL   = 2 * time.Second
	// overlapPolicy lets a slot run while an earlier one still runs, each
	// under a lease of its own: with OverlapForbid (the default) a
	// Postgres stall or a frozen holder longer than a second makes the
	// next slots skipped for overlap, by policy (3 to 5 of 30 seen here).
	overlapPolicy = scheduler.OverlapAllow
)

// errNoRunYet: no run of the job is in flight yet.
var errNoRunYet = errors.New("no run in flight yet")

func init() { workers["sched"] = schedWorker }

// schedWorker is one scheduler replica: its Postgres connections go
// through a fault proxy of its own ("pgdelay <ms>" on stdin sets the
// latency), it prints "run <job> <slot unix>" when a run starts, and it
// stops gracefully at "quit".
func schedWorker() error {
	ctx := context.Background()
	start, err := strconv.ParseInt(os.Getenv(envStart), 10, 64)
	if err != nil {
		return err
	}
	end, err := strconv.ParseInt(os.Getenv(envEnd), 10, 64)
	if err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		return err
	}
	proxy, err := faultproxy.New(fmt.Sprintf("127.0.0.1:%d", cfg.ConnConfig.Port))
	if err != nil {
		return err
	}
	defer proxy.Close()
	port, _ := strconv.Atoi(proxy.Addr()[strings.LastIndexByte(proxy.Addr(), ':')+1:])
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.MaxConns = "127.0.0.1", uint16(port), 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	schema := os.Getenv(envSchema)
	s, err := openSink(ctx, pool, schema, false)
	if err != nil {
		return err
	}
	opts := &redis.Options{Addr: os.Getenv(envRedis)}
	fastClient(opts)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	leases, err := lease.New(rdb, lease.Options{Prefix: "chaos:sched:"})
	if err != nil {
		return err
	}
	ldg, err := pgledger.New(pool, pgledger.Options{Schema: schema})
	if err != nil {
		return err
	}
	sched, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg})
	if err != nil {
		return err
	}
	var out sync.Mutex
	for _, name := range []string{guardedJob, controlJob} {
		err := sched.Register(scheduler.Job{
			Name: name, Spec: "* * * * * *", LeaseTTL: schedTTL, Overlap: overlapPolicy,
			StartAt: time.Unix(start, 0), EndAt: time.Unix(end, 0),
			RetryBackoff: 200 * time.Millisecond, RetryMaxBackoff: time.Second, MaxAttempts: 5,
			Run: func(_ context.Context, run scheduler.Run) error {
				out.Lock()
				fmt.Printf("run %s %d\n", run.Job, run.At.Unix())
				out.Unlock()
				// The work ignores ctx, as in-flight work does: a holder
				// frozen here writes when it thaws.
				work := time.NewTimer(300 * time.Millisecond)
				<-work.C
				wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := s.writeOnce(wctx, pool, run.Job, run.IdempotencyKey, run.Holder(), name == guardedJob)
				return err
			},
		})
		if err != nil {
			return err
		}
	}
	if err := sched.Start(ctx); err != nil {
		return err
	}
	lines := newLineReader(os.Stdin)
	for {
		cmd, ok := lines.next()
		if !ok || cmd == "quit" {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return sched.Stop(sctx)
		}
		var ms int
		if _, err := fmt.Sscanf(cmd, "pgdelay %d", &ms); err != nil {
			return fmt.Errorf("command %q: %w", cmd, err)
		}
		proxy.SetDelay(faultproxy.Upstream, time.Duration(ms)*time.Millisecond)
	}
}

// schedRun is the parent's view of the worker processes.
type schedRun struct {
	t    *testing.T
	env  []string
	mu   sync.Mutex
	ws   []*workerProc
	last []runEvent // per worker: the last run it started
	wg   sync.WaitGroup
}

type runEvent struct {
	job string
	at  time.Time // when the parent read it
}

// start starts worker id (again) and follows its "run" lines.
func (r *schedRun) start(id int) {
	w := startWorker(r.t, "sched", id, r.env...)
	r.mu.Lock()
	r.ws[id] = w
	r.mu.Unlock()
	r.wg.Go(func() {
		for line := range w.lines {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "run" {
				r.mu.Lock()
				if r.ws[id] == w {
					r.last[id] = runEvent{job: f[1], at: time.Now()}
				}
				r.mu.Unlock()
			}
		}
	})
}

// midRun returns a worker that started a run of job within the last
// 250 ms (still in its 300 ms of work), or a random one.
func (r *schedRun) midRun(job string) *workerProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, e := range r.last {
		if e.job == job && time.Since(e.at) < 250*time.Millisecond {
			return r.ws[id]
		}
	}
	return nil
}

// TestSchedulerProcessesUnderMixedFaults: 5 scheduler processes share one
// Redis and one Postgres ledger and run two jobs every second for 10
// minutes (at full scale). Every 2-6 s one fault, at random: a holder
// SIGSTOPed mid-run past its lease TTL, a process SIGKILLed and started
// again, Redis SIGSTOPed for 0.3-3 s, Redis restarted empty, or 1.5 s of
// latency on one process's Postgres connections. Counted: slots with more
// than one effect (must be 0), slots that ran (>= 99%), and why the others
// did not (ledger status: a slot neither run nor skipped by policy is
// lost, a violation). Control: the job that writes without the fence
// check and the idempotency key, which shows duplicate effects.
func TestSchedulerProcessesUnderMixedFaults(t *testing.T) {
	t.Parallel()
	const name = "scheduler-mix"
	duration := max(30*time.Second, time.Duration(float64(10*time.Minute)*scale()))
	r := newReport(name, 1, 1)
	s, pool := newSink(t, "chaos_sched_")
	ctx := context.Background()
	ldg, err := pgledger.New(pool, pgledger.Options{Schema: s.schema})
	require.NoError(t, err)
	require.NoError(t, ldg.Migrate(ctx))
	srv := redisproc.Start(t)

	start := time.Now().Truncate(time.Second).Add(5 * time.Second)
	end := start.Add(duration.Truncate(time.Second))
	run := &schedRun{t: t, ws: make([]*workerProc, 5), last: make([]runEvent, 5), env: []string{
		envRedis + "=" + srv.Addr(), envSchema + "=" + s.schema,
		envStart + "=" + strconv.FormatInt(start.Unix(), 10), envEnd + "=" + strconv.FormatInt(end.Unix(), 10),
	}}
	t.Cleanup(run.wg.Wait) // after every worker's own cleanup
	for id := range 5 {
		run.start(id)
	}
	expected := int(end.Sub(start) / time.Second)
	bar := newProgress(name, expected)

	faults := map[string]int{}
	pauseFor := func(lo, hi time.Duration) {
		timer := time.NewTimer(lo + rand.N(hi-lo))
		<-timer.C
	}
	controlStops := 0
	for nFaults := 0; time.Until(end) > 8*time.Second && nFaults < 1000; nFaults++ {
		pauseFor(2*time.Second, 6*time.Second)
		for range max(0, int(time.Since(start)/time.Second)-bar.done) {
			bar.step()
		}
		k := rand.N(5)
		if faults["holder_sigstop"] < 2 {
			k = 0 // the first two faults: one guarded run, one control run frozen
		}
		t.Logf("fault %d at %s: %d", nFaults, time.Now().UTC().Format("15:04:05.000"), k)
		switch k {
		case 0: // holder SIGSTOPed mid-run past its TTL; every other one a control run
			job := guardedJob
			if faults["holder_sigstop"]%2 == 1 {
				job = controlJob
			}
			var w *workerProc
			if testwait.Poll(5*time.Second, 5*time.Millisecond, func() error {
				if w = run.midRun(job); w == nil {
					return errNoRunYet
				}
				return nil
			}) != nil {
				continue // no run of job within 5 s: another fault
			}
			if job == controlJob {
				controlStops++
			}
			faults["holder_sigstop"]++
			w.signal(t, syscall.SIGSTOP)
			pauseFor(schedTTL+500*time.Millisecond, 2*schedTTL+time.Second)
			w.signal(t, syscall.SIGCONT)
		case 1: // SIGKILL, and a new process after 0.5-2 s
			id := rand.N(5)
			run.mu.Lock()
			w := run.ws[id]
			run.mu.Unlock()
			faults["holder_sigkill"]++
			_ = w.cmd.Process.Kill()
			pauseFor(500*time.Millisecond, 2*time.Second)
			run.start(id)
		case 2:
			faults["redis_pause"]++
			srv.Pause(t)
			pauseFor(300*time.Millisecond, 3*time.Second)
			srv.Resume(t)
		case 3:
			faults["redis_restart"]++
			srv.Restart(t)
		case 4:
			run.mu.Lock()
			w := run.ws[rand.N(5)]
			run.mu.Unlock()
			faults["pg_latency"]++
			w.send(t, "pgdelay 1500")
			pauseFor(time.Second, 3*time.Second)
			w.send(t, "pgdelay 0")
		}
	}

	// Every slot is decided (succeeded, or skipped/missed by policy) within
	// a minute of the window's end.
	from, to := start, end
	var recs []ledger.Record
	for deadline := end.Add(time.Minute); ; {
		recs, err = ldg.List(ctx, guardedJob, "", from, to, 100000)
		require.NoError(t, err)
		done := 0
		for _, rec := range recs {
			if rec.Status != ledger.StatusRunning && rec.Status != ledger.StatusPending {
				done++
			}
		}
		if (done >= expected && time.Now().After(end.Add(schedTTL))) || time.Now().After(deadline) {
			break
		}
		pauseFor(400*time.Millisecond, 600*time.Millisecond)
	}
	for range max(0, expected-bar.done) {
		bar.step()
	}
	run.mu.Lock()
	for _, w := range run.ws {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_, _ = fmt.Fprintln(w.in, "quit")
	}
	run.mu.Unlock()

	count := func(job string) (slots, dups int, keys map[string]int) {
		es, err := s.effects(ctx, pool, job)
		require.NoError(t, err)
		keys = map[string]int{}
		for _, e := range es {
			keys[e.value]++
		}
		for _, c := range keys {
			if c > 1 {
				dups++
			}
		}
		return len(keys), dups, keys
	}
	ran, dups, keys := count(guardedJob)
	_, controlDups, _ := count(controlJob)
	missed, lost := map[string]int{}, 0
	for at := start; at.Before(end); at = at.Add(time.Second) {
		key := ledger.Slot{Job: guardedJob, At: at}.Key()
		if keys[key] > 0 {
			continue
		}
		st := "none"
		t.Logf("slot %s has no effect", at.Format(time.RFC3339))
		for _, rec := range recs {
			if rec.Slot.At.Equal(at) {
				st = string(rec.Status)
				if rec.Reason != "" {
					st += "(" + rec.Reason + ")"
				}
				t.Logf("slot %s: %s, attempts %+v", at.Format(time.RFC3339), st, rec.Attempts)
			}
		}
		missed[st]++
		if !strings.HasPrefix(st, string(ledger.StatusSkipped)) && !strings.HasPrefix(st, string(ledger.StatusMissed)) {
			lost++ // not a decision of the job's policy
		}
	}
	if controlDups > 0 {
		r.fired = 1
	}
	r.violations = dups + lost
	r.add("processes", 5)
	r.add("duration", duration)
	r.add("duplicate_effects", dups)
	r.ratio("slots_run", ran, expected)
	r.add("missed", describe(missed))
	r.add("lost", lost)
	r.add("faults", describe(faults))
	r.add("control_duplicates", fmt.Sprintf("%d(%d_sigstops)", controlDups, controlStops))
	r.finish(t)
	require.GreaterOrEqual(t, ran*100, expected*99, "slots_run >= 99%%")
}

// describe prints a map as k:v,k:v in key order, or "0".
func describe[K ~string](m map[K]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s:%d", k, v))
	}
	if len(parts) == 0 {
		return "0"
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
