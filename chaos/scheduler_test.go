package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
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

func init() { workers["sched"] = schedWorker }

// schedWorker is one scheduler replica: its Postgres connections go
// through a fault proxy of its own ("pgdelay <ms>" on stdin sets the
// latency), it prints "run <job> <slot unix>" when a run starts, and it
// stops gracefully at "quit". "freeze <job>" arms a freeze: the next run
// of job prints "frozen <job> <slot unix>" and SIGSTOPs its own process
// mid-run, holding the slot's lease (the parent SIGCONTs it); "unarm"
// disarms it and answers "unarmed". A process that stops itself is frozen
// mid-run whatever the host's load; one stopped from outside at a guessed
// moment may be between runs.
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
	ldg, err := workerLedger(pool, schema, rdb)
	if err != nil {
		return err
	}
	var logger *slog.Logger
	if dir := os.Getenv(envSchedLog); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("worker-%s-%d.log", os.Getenv(envWorkerID), os.Getpid())))
		if err != nil {
			return err
		}
		defer f.Close()
		logger = slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	sched, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg, Logger: logger})
	if err != nil {
		return err
	}
	var out sync.Mutex
	var armed atomic.Value // the job name whose next run freezes, or ""
	armed.Store("")
	for _, name := range []string{guardedJob, controlJob} {
		err := sched.Register(scheduler.Job{
			Name: name, Spec: "* * * * * *", LeaseTTL: schedTTL, Overlap: overlapPolicy,
			StartAt: time.Unix(start, 0), EndAt: time.Unix(end, 0),
			RetryBackoff: 200 * time.Millisecond, RetryMaxBackoff: time.Second, MaxAttempts: 5,
			// Every slot missed while the machine did not run (a CI
			// VM suspended for 21 s took 20 slots of 30 at once, and
			// the default MaxCatchUp of 16 skipped 4 by policy) runs
			// late: the scenario counts slots run.
			MaxCatchUp: catchUpAll,
			Run: func(_ context.Context, run scheduler.Run) error {
				out.Lock()
				fmt.Printf("run %s %d\n", run.Job, run.At.Unix())
				freeze := armed.CompareAndSwap(run.Job, "")
				if freeze {
					fmt.Printf("frozen %s %d\n", run.Job, run.At.Unix())
				}
				out.Unlock()
				if freeze {
					// Real SIGSTOP, mid-run, the slot's lease held.
					if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
						return err
					}
				}
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
		switch job, ok := strings.CutPrefix(cmd, "freeze "); {
		case ok:
			armed.Store(job)
		case cmd == "unarm":
			out.Lock()
			armed.Store("")
			fmt.Println("unarmed")
			out.Unlock()
		default:
			if _, err := fmt.Sscanf(cmd, "pgdelay %d", &ms); err != nil {
				return fmt.Errorf("command %q: %w", cmd, err)
			}
			proxy.SetDelay(faultproxy.Upstream, time.Duration(ms)*time.Millisecond)
		}
	}
}

// schedRun is the parent's view of the worker processes.
type schedRun struct {
	t      *testing.T
	env    []string
	mu     sync.Mutex
	ws     []*workerProc
	ran    map[string][]int // "<job> <slot unix>": the workers that started it
	events chan freezeEvent // "frozen" and "unarmed" lines
	wg     sync.WaitGroup
}

// freezeEvent is a worker's answer to "freeze" or "unarm": slot is the
// "<job> <slot unix>" it froze in, "" for unarmed.
type freezeEvent struct {
	id   int
	slot string
}

// start starts worker id (again) and follows its lines.
func (r *schedRun) start(id int) {
	w := startWorker(r.t, "sched", id, r.env...)
	r.mu.Lock()
	r.ws[id] = w
	r.mu.Unlock()
	r.wg.Go(func() {
		for line := range w.lines {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "run":
				r.mu.Lock()
				r.ran[f[1]+" "+f[2]] = append(r.ran[f[1]+" "+f[2]], id)
				r.mu.Unlock()
			case len(f) == 3 && f[0] == "frozen":
				r.events <- freezeEvent{id: id, slot: f[1] + " " + f[2]}
			case len(f) == 1 && f[0] == "unarmed":
				r.events <- freezeEvent{id: id}
			}
		}
	})
}

// frozenRun is a worker stopped by itself mid-run: slot is the run's
// "<job> <slot unix>".
type frozenRun struct {
	id   int
	slot string
}

// freeze arms every worker to stop itself in its next run of job, waits
// up to 10 s for the first to do so, then disarms the others. It returns
// the workers that froze (usually one; two when a second froze before it
// was disarmed), none when no run of job started within 10 s. Arming
// every worker, rather than one, makes a freeze certain within a second
// or two however the claims fall among them on a busy host.
func (r *schedRun) freeze(job string) []frozenRun {
	for drained := false; !drained; { // late answers of an earlier freeze
		select {
		case e := <-r.events:
			r.t.Logf("worker %d: a late freeze answer %+v", e.id, e)
		default:
			drained = true
		}
	}
	r.mu.Lock()
	ws := slices.Clone(r.ws)
	r.mu.Unlock()
	for _, w := range ws {
		w.send(r.t, "freeze "+job)
	}
	var frozen []frozenRun
	answered := map[int]bool{}
	next := func(limit time.Duration) bool {
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case e := <-r.events:
			answered[e.id] = true
			if e.slot != "" {
				frozen = append(frozen, frozenRun(e))
			}
			return true
		case <-timer.C:
			return false
		}
	}
	next(10 * time.Second)
	for _, w := range ws {
		if !answered[w.id] {
			w.send(r.t, "unarm")
		}
	}
	for len(answered) < len(ws) {
		require.True(r.t, next(20*time.Second), "workers answered neither frozen nor unarmed: %v of %d", answered, len(ws))
	}
	return frozen
}

// successor reports whether a worker other than id started slot.
func (r *schedRun) successor(slot string, id int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.ran[slot], func(other int) bool { return other != id })
}

// errNoSuccessor: no other worker started the frozen run's slot yet.
var errNoSuccessor = errors.New("no successor yet")

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
	schedulerMix(t, "scheduler-mix", false)
}

// The same scenario with the Redis ledger (redisledger, its joined claims
// and finishes and its hot runs: a frozen or killed holder's hot run is
// taken over), without the fault that restarts Redis empty (a Redis
// ledger's data loss has a scenario of its own, redis-data-loss): every
// other fault instead.
func TestSchedulerProcessesUnderMixedFaultsRedisLedger(t *testing.T) {
	t.Parallel()
	schedulerMix(t, "scheduler-mix-redis-ledger", true)
}

// workerLedger is a worker's ledger: pgledger in schema, or redisledger
// on rdb when envLedger is "redis".
func workerLedger(pool *pgxpool.Pool, schema string, rdb redis.UniversalClient) (ledger.Ledger, error) {
	if os.Getenv(envLedger) == "redis" {
		return redisledger.New(rdb, redisledger.Options{Prefix: "chaos:sched:ledger:"})
	}
	return pgledger.New(pool, pgledger.Options{Schema: schema})
}

// catchUpAll is the scheduler workers' MaxCatchUp: more than the slots
// of the longest window (10 min at full scale), so that a missed-slot
// claim runs all of them.
const catchUpAll = 1000

// envLedger picks a scheduler worker's ledger: "redis" or pgledger.
const envLedger = "CHAOS_LEDGER"

// envSchedLog, when set, names a directory where each scheduler worker
// writes its scheduler's log (JSON, Debug and up) to
// worker-<id>-<pid>.log: to follow a failed scenario's claims.
const envSchedLog = "CHAOS_SCHED_LOG"

func schedulerMix(t *testing.T, name string, redisLedger bool) {
	duration := max(30*time.Second, time.Duration(float64(10*time.Minute)*scale()))
	r := newReport(name, 1, 1)
	s, pool := newSink(t, "chaos_sched_")
	ctx := context.Background()
	srv := redisproc.Start(t)
	var ldg ledger.Ledger
	env := []string{envLedger + "=pg"}
	if redisLedger {
		l, err := redisledger.New(srv.Client(t), redisledger.Options{Prefix: "chaos:sched:ledger:"})
		require.NoError(t, err)
		ldg, env = l, []string{envLedger + "=redis"}
	} else {
		l, err := pgledger.New(pool, pgledger.Options{Schema: s.schema})
		require.NoError(t, err)
		require.NoError(t, l.Migrate(ctx))
		ldg = l
	}

	start := time.Now().Truncate(time.Second).Add(5 * time.Second)
	end := start.Add(duration.Truncate(time.Second))
	run := &schedRun{t: t, ws: make([]*workerProc, 5), ran: map[string][]int{}, events: make(chan freezeEvent, 16), env: append(env,
		envRedis+"="+srv.Addr(), envSchema+"="+s.schema,
		envStart+"="+strconv.FormatInt(start.Unix(), 10), envEnd+"="+strconv.FormatInt(end.Unix(), 10),
	)}
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
		k := rand.N(5)
		if redisLedger && k == 3 {
			k = 2 // no restart of Redis empty: a pause instead
		}
		if faults["holder_sigstop"] < 2 {
			k = 0 // the first two faults: one guarded run, one control run frozen
			pauseFor(500*time.Millisecond, time.Second)
		} else {
			pauseFor(2*time.Second, 6*time.Second)
		}
		for range max(0, int(time.Since(start)/time.Second)-bar.done) {
			bar.step()
		}
		t.Logf("fault %d at %s: %d", nFaults, time.Now().UTC().Format("15:04:05.000"), k)
		switch k {
		case 0: // holder SIGSTOPed mid-run past its TTL; every other one a control run
			job := guardedJob
			if faults["holder_sigstop"]%2 == 1 {
				job = controlJob
			}
			frozen := run.freeze(job)
			if len(frozen) == 0 {
				continue // no run of job within 10 s: another fault
			}
			if job == controlJob {
				controlStops++
			}
			faults["holder_sigstop"]++
			// Frozen past the TTL, and until another worker took the slot
			// over (the abandoned attempt retried): the thawed holder's
			// late write then races its successor's, or follows it.
			pauseFor(schedTTL+500*time.Millisecond, 2*schedTTL+time.Second)
			for _, f := range frozen {
				if err := testwait.Poll(20*time.Second, 20*time.Millisecond, func() error {
					if !run.successor(f.slot, f.id) {
						return errNoSuccessor
					}
					return nil
				}); err != nil {
					t.Logf("slot %s: no successor within 20 s of the freeze", f.slot)
				} else {
					faults["taken_over"]++
				}
			}
			run.mu.Lock()
			for _, f := range frozen {
				run.ws[f.id].signal(t, syscall.SIGCONT)
			}
			run.mu.Unlock()
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
		var err error
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
