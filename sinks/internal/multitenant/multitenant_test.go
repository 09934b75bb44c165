package multitenant_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/redisstore"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

const (
	jobName = "charge"
	// seconds is how many one-second slots each partition gets: 36 x 3
	// partitions = 108 slots.
	seconds  = 36
	replicas = 3
	// resource is the one guard resource every partition writes.
	resource = "charges"
)

var partitions = []string{"tenant-a", "tenant-b", "tenant-c"}

// TestPartitionsSharingOneEndpointAreNotRefused is the scenario of issue 11
// part 1. Each run returns scheduler.Permanent on a stale-token error, as
// the Transport documentation suggests, so a single false rejection fails a
// slot for good. It asserts 0 false rejections over 108 slots, every slot's
// effect exactly once in both sinks, and that a frozen former holder of
// tenant-b's lease is refused by both.
func TestPartitionsSharingOneEndpointAreNotRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	pool := shared.Pool(t)
	schema := shared.Schema(t, "multitenant_test_")
	guard, err := pgfence.New(pgfence.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, guard.Migrate(ctx, pool))
	effects := pgx.Identifier{schema, "effects"}.Sanitize()
	_, err = pool.Exec(ctx, `CREATE TABLE `+effects+` (key text NOT NULL, scope text NOT NULL, token bigint NOT NULL)`)
	require.NoError(t, err)

	store, err := redisstore.NewStore(rdb, redisstore.Options{Prefix: prefix + "idem:"})
	require.NoError(t, err)
	fnc, err := redisstore.NewFence(rdb, redisstore.Options{Prefix: prefix + "fence:"})
	require.NoError(t, err)

	// The endpoint: one path for every tenant, so one fence resource.
	events := &eventCounter{}
	// The documented setup: the replicas sign their fencing headers with
	// a key the service verifies.
	key := httpfence.Key{ID: "k1", Secret: []byte("multitenant-test-key-32-bytes-ok")}
	verifier, err := httpfence.NewVerifier(key)
	require.NoError(t, err)
	signer, err := httpfence.NewSigner(key)
	require.NoError(t, err)
	mw, err := httpfence.Middleware(httpfence.Options{
		Store:    store,
		Fence:    fnc,
		Verifier: verifier,
		Logger:   slog.New(events),
	})
	require.NoError(t, err)
	var (
		mu         sync.Mutex
		httpEffect = map[string]int{} // handler runs per idempotency key
	)
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, _ := httpfence.ParseKey(r.Header.Get(httpfence.KeyHeader))
		mu.Lock()
		httpEffect[key]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport, BaseDelay: 20 * time.Millisecond, Signer: signer}}

	// charge is the side effect of one operation: the HTTP call, carrying
	// the holder of ctx, then the guarded insert with h.
	charge := func(ctx context.Context, key string, h fence.Holder) (httpErr, pgErr error) {
		req, err := http.NewRequestWithContext(httpfence.WithIdempotencyKey(ctx, key), http.MethodPost, srv.URL+"/v1/charges", strings.NewReader(key))
		if err != nil {
			return err, nil
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				err = fmt.Errorf("charge %s: %s", key, resp.Status)
			}
		}
		if err != nil {
			return err, nil
		}
		return nil, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := guard.Check(ctx, tx, resource, h); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+effects+` (key, scope, token) VALUES ($1, $2, $3)`, key, h.Scope, int64(h.Token))
			return err
		})
	}

	// A former holder of tenant-b's lease, frozen before the replicas
	// start: it writes once while fresh, then its lease runs out behind
	// its back.
	leasePrefix := prefix + "lease:"
	frozenClient, err := lease.New(rdb, lease.Options{Prefix: leasePrefix})
	require.NoError(t, err)
	frozen, err := frozenClient.TryAcquire(ctx, jobName+"|tenant-b", 3*time.Second)
	require.NoError(t, err)
	httpErr, pgErr := charge(frozen.Context(), "frozen:first", frozen.Holder())
	require.NoError(t, httpErr, "the fresh holder's write")
	require.NoError(t, pgErr, "the fresh holder's write")
	leasetest.Freeze(frozen)
	require.NoError(t, leasetest.ForceExpire(ctx, rdb, frozenClient, jobName+"|tenant-b"))

	// The replicas.
	start := time.Now().Truncate(time.Second).Add(2 * time.Second)
	end := start.Add(seconds * time.Second)
	var (
		falseHTTP  atomic.Int64 // stale-token errors healthy runs got over HTTP
		falsePG    atomic.Int64 // ... and from the guard
		runs       atomic.Int64
		finished   sync.Map // slot key -> true once its run succeeded or failed for good
		doneCount  atomic.Int64
		bSucceeded atomic.Bool // a replica's tenant-b run succeeded
		scopes     sync.Map    // partition -> scope seen
	)
	job := scheduler.Job{
		Name: jobName, Spec: "* * * * * *", Partitions: partitions, StartAt: start, EndAt: end,
		// Every slot runs, however far behind a loaded host falls (but
		// for those the overlap policy skips, see overlapSkipped): by
		// default a claim runs the 16 latest missed slots and skips
		// older ones.
		MaxCatchUp: seconds,
		Run: func(ctx context.Context, run scheduler.Run) error {
			runs.Add(1)
			scopes.Store(run.Partition, run.Scope)
			h, ok := fence.HolderFromContext(ctx)
			if !ok || h != run.Holder() {
				return scheduler.Permanent(fmt.Errorf("ctx holder %+v, run holder %+v", h, run.Holder()))
			}
			finish := func() {
				if _, loaded := finished.LoadOrStore(run.IdempotencyKey, true); !loaded {
					doneCount.Add(1)
				}
			}
			httpErr, pgErr := charge(ctx, run.IdempotencyKey, run.Holder())
			for i, err := range []error{httpErr, pgErr} {
				if errors.Is(err, fence.ErrStaleToken) {
					[]*atomic.Int64{&falseHTTP, &falsePG}[i].Add(1)
					t.Logf("false rejection of %s (scope %q, token %d): %v", run.IdempotencyKey, run.Scope, run.Token, err)
					finish()
					return scheduler.Permanent(err)
				}
				if err != nil {
					return err
				}
			}
			finish()
			if run.Partition == "tenant-b" {
				bSucceeded.Store(true)
			}
			return nil
		},
	}
	scheds := make([]*scheduler.Scheduler, replicas)
	for i := range scheds {
		leases, err := lease.New(rdb, lease.Options{Prefix: leasePrefix})
		require.NoError(t, err)
		ledger, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
		require.NoError(t, err)
		s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ledger})
		require.NoError(t, err)
		require.NoError(t, s.Register(job))
		require.NoError(t, s.Start(context.Background()))
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Stop(sctx)
		})
		scheds[i] = s
	}

	// Once tenant-b's lease has a newer holder that wrote, the frozen
	// holder wakes up and writes again: both sinks refuse it.
	testwait.Until(t, 20*time.Second, "a replica ran a tenant-b slot", bSucceeded.Load)
	require.NoError(t, frozen.Context().Err(), "frozen: the holder still believes it holds the lease")
	_, err = client.Do(mustRequest(t, httpfence.WithIdempotencyKey(frozen.Context(), "frozen:late"), srv.URL+"/v1/charges"))
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale, "the frozen holder's late call")
	require.Equal(t, jobName+"|tenant-b", stale.Scope)
	require.Equal(t, frozen.Token(), stale.Presented)
	require.Greater(t, stale.Current, frozen.Token())
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return guard.Check(ctx, tx, resource, frozen.Holder()) })
	var pgStale *fence.StaleTokenError
	require.ErrorAs(t, err, &pgStale, "the frozen holder's late guarded write")
	require.Equal(t, jobName+"|tenant-b", pgStale.Scope)
	t.Logf("frozen holder of %s (token %d) refused: http current %d, pgfence current %d", frozen.Holder().Scope, frozen.Token(), stale.Current, pgStale.Current)
	leasetest.Thaw(frozen)
	testwait.Done(t, frozen.Done(), 10*time.Second, "the thawed holder learns it lost the lease")

	// Every slot is decided: run, or skipped by the overlap policy.
	total := seconds * len(partitions)
	// overlapSkipped counts the slots the overlap policy (forbid, the
	// default) skipped: due during a run of the same partition that took
	// longer than a second, as on a loaded host. They are decided, by
	// policy, and have no effect.
	overlapSkipped := func() int {
		n := 0
		for _, p := range partitions {
			recs, err := scheds[0].Runs(ctx, jobName, p, start, end, 1000)
			require.NoError(t, err)
			for _, r := range recs {
				if r.Status == ledger.StatusSkipped && r.Reason == "overlap" {
					n++
				}
			}
		}
		return n
	}
	limit := time.Until(end) + 45*time.Second
	if err := testwait.Poll(limit, 200*time.Millisecond, func() error {
		if n := int(doneCount.Load()); n < total {
			if skipped := overlapSkipped(); n+skipped < total {
				return fmt.Errorf("%d of %d slots finished, %d skipped for overlap", n, total, skipped)
			}
		}
		return nil
	}); err != nil {
		statuses := map[string]map[string]int{}
		for _, p := range partitions {
			recs, rerr := scheds[0].Runs(ctx, jobName, p, start, end, 1000)
			require.NoError(t, rerr)
			statuses[p] = map[string]int{}
			for _, r := range recs {
				statuses[p][string(r.Status)+"("+r.Reason+")"]++
			}
		}
		t.Fatalf("every slot runs: %v; ledger statuses by partition: %v", err, statuses)
	}
	for _, s := range scheds {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, s.Stop(sctx))
		cancel()
	}

	// The figures.
	attempts, records, skipped := 0, 0, 0
	var failed []string
	for _, p := range partitions {
		recs, err := scheds[0].Runs(ctx, jobName, p, start, end, 1000)
		require.NoError(t, err)
		records += len(recs)
		for _, r := range recs {
			attempts += len(r.Attempts)
			if r.Status == ledger.StatusSkipped && r.Reason == "overlap" {
				skipped++
				continue
			}
			if r.Status != ledger.StatusSucceeded {
				failed = append(failed, fmt.Sprintf("%s %s: %s", p, r.Slot.At.Format(time.TimeOnly), r.Status))
			}
		}
		scope, _ := scopes.Load(p)
		require.Equal(t, jobName+"|"+p, scope, "a run's scope is its (job, partition) lease")
	}
	mu.Lock()
	defer mu.Unlock()
	var dup []string
	for key, n := range httpEffect {
		if n != 1 {
			dup = append(dup, fmt.Sprintf("%s x%d", key, n))
		}
	}
	sort.Strings(dup)
	rows, err := pool.Query(ctx, `SELECT key, count(*) FROM `+effects+` GROUP BY key`)
	require.NoError(t, err)
	pgEffect, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kv, error) {
		var e kv
		return e, r.Scan(&e.key, &e.n)
	})
	require.NoError(t, err)
	pgDup := 0
	for _, e := range pgEffect {
		if e.n != 1 {
			pgDup++
		}
	}
	t.Logf("%d slots on %d replicas x %d partitions: %d runs, %d attempts, %d slots failed, %d skipped for overlap; "+
		"false rejections %d (http %d, pgfence %d); middleware stale_token_rejected %d (1 is the frozen holder's); "+
		"http effects %d keys, pg effects %d keys",
		total, replicas, len(partitions), runs.Load(), attempts, len(failed), skipped,
		falseHTTP.Load()+falsePG.Load(), falseHTTP.Load(), falsePG.Load(), events.count("stale_token_rejected"),
		len(httpEffect), len(pgEffect))

	require.Zero(t, falseHTTP.Load()+falsePG.Load(), "false rejections")
	require.Equal(t, total, records, "a ledger record per slot")
	require.Empty(t, failed, "every slot succeeded, or was skipped by the overlap policy")
	require.Equal(t, 1, events.count("stale_token_rejected"), "the middleware refused the frozen holder only")
	require.Empty(t, dup, "every effect exactly once over HTTP")
	require.Zero(t, pgDup, "every effect exactly once in Postgres")
	require.Len(t, httpEffect, total-skipped+1, "every slot run, plus the frozen holder's fresh write")
	require.Len(t, pgEffect, total-skipped+1, "every slot run, plus the frozen holder's fresh write")
	require.Zero(t, httpEffect["frozen:late"], "the frozen holder's late call never reached the handler")
}

type kv struct {
	key string
	n   int
}

func mustRequest(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("late"))
	require.NoError(t, err)
	return req
}

// eventCounter is a slog.Handler that counts records by message.
type eventCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *eventCounter) Enabled(context.Context, slog.Level) bool { return true }

func (c *eventCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[r.Message]++
	return nil
}

func (c *eventCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *eventCounter) WithGroup(string) slog.Handler      { return c }

func (c *eventCounter) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[msg]
}
