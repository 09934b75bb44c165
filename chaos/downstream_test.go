package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
)

// The downstream scenario's settings: the downstream's LockTTL (the
// production default is 1 min; short here to bound the run), the slots'
// spacing, and the environment of a downstream worker.
const (
	downLockTTL = 5 * time.Second
	downEvery   = 2 * time.Second
	envDownAddr = "CHAOS_DOWNSTREAM_ADDR"
	downJob     = "post"
	downControl = "post-control"
)

func init() { workers["downstream"] = downstreamWorker }

// downKey is the signing key the job's Transport and the downstream share
// (the documented setup: the middleware admits signed fencing headers only).
var downKey = httpfence.Key{ID: "chaos-down", Secret: []byte("chaos-downstream-key-of-32-bytes")}

// downstreamWorker is the downstream service: httpfence.Middleware over a
// pgstore.Store (which survives the process) in front of a handler that
// records one effect per request in Postgres. The first request of each
// key (remembered in Postgres) prints "crash <key>" and blocks before its
// effect: the parent SIGKILLs the process then, mid-request, leaving the
// key locked for downLockTTL. It prints "ready" once it serves, and
// stops at "quit".
func downstreamWorker() error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL())
	if err != nil {
		return err
	}
	defer pool.Close()
	schema := os.Getenv(envSchema)
	store, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
	if err != nil {
		return err
	}
	verifier, err := httpfence.NewVerifier(downKey)
	if err != nil {
		return err
	}
	mw, err := httpfence.Middleware(httpfence.Options{Store: store, LockTTL: downLockTTL, Verifier: verifier})
	if err != nil {
		return err
	}
	crashed, effects := pgx.Identifier{schema, "crashed"}.Sanitize(), pgx.Identifier{schema, "effects"}.Sanitize()
	var out sync.Mutex
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(httpfence.KeyHeader)
		tag, err := pool.Exec(r.Context(), `INSERT INTO `+crashed+` (key) VALUES ($1) ON CONFLICT DO NOTHING`, key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if tag.RowsAffected() == 1 {
			out.Lock()
			fmt.Printf("crash %s\n", key)
			out.Unlock()
			<-r.Context().Done() // the parent kills the process meanwhile
			return
		}
		if _, err := pool.Exec(r.Context(), `INSERT INTO `+effects+` (key) VALUES ($1)`, key); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	// The address of the process just killed: retried for a while in
	// case the kernel has not let it go yet.
	var ln net.Listener
	for range 100 {
		if ln, err = net.Listen("tcp", os.Getenv(envDownAddr)); err == nil {
			break
		}
		pause := time.NewTimer(50 * time.Millisecond)
		<-pause.C
	}
	if err != nil {
		return err
	}
	// One request at a time through the middleware: when a handler blocks
	// to be killed, no other request is between its effect and the
	// store's Complete, which a kill would turn into a second run by
	// design (httpfence documents it: fence or dedupe the handler's own
	// writes). The kill is then mid-request for every request it hits.
	var one sync.Mutex
	serial := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		one.Lock()
		defer one.Unlock()
		h.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: serial, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	out.Lock()
	fmt.Println("ready")
	out.Unlock()
	lines := newLineReader(os.Stdin)
	for {
		if cmd, ok := lines.next(); !ok || cmd == "quit" {
			break
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-served
	return err
}

// TestDownstreamKilledMidRequest: a scheduler runs a job every 2 s whose
// run POSTs through httpfence.Transport (the run's idempotency key and
// fencing headers) to a downstream worker process serving
// httpfence.Middleware over a Postgres store. The first request of every
// slot is SIGKILLed mid-handler, before its effect, and the downstream is
// started again at once: the key stays locked for the downstream's
// LockTTL (5 s), its in-flight answers carry the lock's remaining time as
// Retry-After. Every slot must end succeeded with exactly one effect: half
// of the slots' Transports wait the lock out within the request, the other
// half (MaxInFlightWait -1) return an *InFlightError that the scheduler
// defers without counting it against MaxAttempts (3). Control: a job whose
// Transport and error do not honour Retry-After (the behaviour before
// issue 31: in-flight answers are plain failures), whose slots end failed
// with no effect.
func TestDownstreamKilledMidRequest(t *testing.T) {
	t.Parallel()
	const name = "downstream-kill"
	n := trials(200)
	r := newReport(name, n, controls(n))
	ctx := context.Background()
	pool := shared.Pool(t)
	schema := shared.Schema(t, "chaos_down_")
	store, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx))
	ldg, err := pgledger.New(pool, pgledger.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, ldg.Migrate(ctx))
	crashed, effects := pgx.Identifier{schema, "crashed"}.Sanitize(), pgx.Identifier{schema, "effects"}.Sanitize()
	_, err = pool.Exec(ctx, `CREATE TABLE `+crashed+` (key text PRIMARY KEY); CREATE TABLE `+effects+` (key text NOT NULL)`)
	require.NoError(t, err)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	env := []string{envSchema + "=" + schema, envDownAddr + "=" + addr}
	var ops []wireOp // unused: the downstream prints no ops
	w := startWorker(t, "downstream", 0, env...)
	w.expect(t, "ready", 30*time.Second, &ops)

	srv := redisproc.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	leases, err := lease.New(rdb, lease.Options{Prefix: "chaos:down:"})
	require.NoError(t, err)
	sched, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg})
	require.NoError(t, err)

	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	// Connection errors while the downstream restarts are retried for
	// about 5 s (attempts of the Transport); in-flight answers as the
	// Transport's options say.
	signer, err := httpfence.NewSigner(downKey)
	require.NoError(t, err)
	waiting := &http.Client{Transport: &httpfence.Transport{Base: base, MaxAttempts: 8, MaxDelay: time.Second, Signer: signer}}
	deferring := &http.Client{Transport: &httpfence.Transport{Base: base, MaxAttempts: 8, MaxDelay: time.Second, MaxInFlightWait: -1, Signer: signer}}
	post := func(ctx context.Context, client *http.Client, run scheduler.Run) error {
		req, err := http.NewRequestWithContext(httpfence.WithIdempotencyKey(ctx, run.IdempotencyKey), http.MethodPost, "http://"+addr+"/pay", strings.NewReader(`{"amount":100}`))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("downstream: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("downstream: %s", resp.Status)
		}
		return nil
	}

	start := time.Now().Truncate(downEvery).Add(3 * downEvery)
	slotAt := func(i int) time.Time { return start.Add(time.Duration(i) * downEvery) }
	job := scheduler.Job{
		Spec: fmt.Sprintf("*/%d * * * * *", int(downEvery/time.Second)), StartAt: start,
		LeaseTTL: 2 * time.Second, Overlap: scheduler.OverlapAllow, Timeout: 30 * time.Second,
		MaxAttempts: 3, RetryBackoff: 200 * time.Millisecond, RetryMaxBackoff: 400 * time.Millisecond,
	}
	guarded := job
	guarded.Name, guarded.EndAt = downJob, slotAt(n)
	guarded.Run = func(ctx context.Context, run scheduler.Run) error {
		if run.At.Sub(start)/downEvery%2 == 0 {
			return post(ctx, waiting, run)
		}
		return post(ctx, deferring, run)
	}
	control := job
	control.Name, control.EndAt = downControl, slotAt(r.controls)
	control.Run = func(ctx context.Context, run scheduler.Run) error {
		// Before issue 31: the in-flight answer is a failure like any
		// other, counted against MaxAttempts.
		if err := post(ctx, deferring, run); err != nil {
			return errors.New(err.Error())
		}
		return nil
	}
	require.NoError(t, sched.Register(guarded))
	require.NoError(t, sched.Register(control))
	require.NoError(t, sched.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = sched.Stop(sctx)
	})

	// decided returns the final record of every slot, or false while one
	// is still to run, running or waiting for its retry.
	decided := func() (map[ledger.Slot]ledger.Record, bool) {
		recs := map[ledger.Slot]ledger.Record{}
		for _, j := range []struct {
			name string
			n    int
		}{{downJob, n}, {downControl, r.controls}} {
			for i := range j.n {
				s := ledger.Slot{Job: j.name, At: slotAt(i)}
				rec, found, err := ldg.Get(ctx, s)
				require.NoError(t, err)
				final := rec.Status == ledger.StatusSucceeded || (rec.Status == ledger.StatusFailed && rec.RetryAt.IsZero())
				if !found || !final {
					return nil, false
				}
				recs[s] = rec
			}
		}
		return recs, true
	}

	// The killer: every "crash" line SIGKILLs the downstream, which is
	// started again at once.
	bar := newProgress(name, n+r.controls)
	kills := 0
	limit := time.NewTimer(time.Until(slotAt(n)) + 2*time.Minute)
	defer limit.Stop()
	poll := time.NewTicker(500 * time.Millisecond)
	defer poll.Stop()
	var recs map[ledger.Slot]ledger.Record
wait:
	for {
		select {
		case line, ok := <-w.lines:
			require.True(t, ok, "the downstream exited")
			if !strings.HasPrefix(line, "crash ") {
				continue
			}
			w.signal(t, syscall.SIGKILL)
			for range w.lines { // until the killed process's stdout closes
			}
			kills++
			bar.step()
			w = startWorker(t, "downstream", 0, env...)
			w.expect(t, "ready", 30*time.Second, &ops)
		case <-poll.C:
			var done bool
			if recs, done = decided(); done {
				break wait
			}
		case <-limit.C:
			t.Fatalf("%s: slots undecided 2 min after the last one", name)
		}
	}

	per := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT key, count(*) FROM `+effects+` GROUP BY key`)
	require.NoError(t, err)
	for rows.Next() {
		var (
			k string
			c int
		)
		require.NoError(t, rows.Scan(&k, &c))
		per[k] = c
	}
	require.NoError(t, rows.Err())
	effectsOf := func(s ledger.Slot) int {
		k, err := httpfence.FormatKey(s.Key())
		require.NoError(t, err)
		return per[k]
	}
	once, deferred, attempts := 0, 0, 0
	for i := range n {
		s := ledger.Slot{Job: downJob, At: slotAt(i)}
		rec, c := recs[s], effectsOf(s)
		for _, a := range rec.Attempts {
			if a.Class == ledger.ClassDeferred {
				deferred++
			}
		}
		attempts += len(rec.Attempts)
		if rec.Status == ledger.StatusSucceeded && c == 1 {
			once++
			continue
		}
		r.violations++
		last, _ := rec.Latest()
		t.Logf("slot %v: %s, %d effects, %d attempts, last %s %q", s.At, rec.Status, c, rec.Attempt, last.Class, last.Error)
	}
	for i := range r.controls {
		s := ledger.Slot{Job: downControl, At: slotAt(i)}
		if rec := recs[s]; rec.Status == ledger.StatusFailed && effectsOf(s) == 0 {
			r.fired++ // the slot ended with no effect
		}
	}
	var crashedKeys int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+crashed).Scan(&crashedKeys))
	r.ratio("slots_with_exactly_one_effect", once, n)
	r.add("killed_mid_request", kills)
	r.add("keys_left_locked", crashedKeys)
	r.add("deferred_attempts", deferred)
	r.add("attempts", attempts)
	r.finish(t)
}
