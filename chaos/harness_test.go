package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// EnvScale names the variable that scales every scenario; DefaultScale is
// what `make test` runs.
const (
	EnvScale     = "CHAOS_SCALE"
	DefaultScale = 0.05
)

var shared pgtest.Shared

// scale returns CHAOS_SCALE, or DefaultScale when unset or invalid.
func scale() float64 {
	if v, err := strconv.ParseFloat(os.Getenv(EnvScale), 64); err == nil && v > 0 && v <= 1 {
		return v
	}
	return DefaultScale
}

// trials returns how many trials a scenario with full trials runs at the
// current scale: at least 2.
func trials(full int) int {
	return max(2, int(math.Round(float64(full)*scale())))
}

// mostTrials is how many of n trials must meet a scenario's fault (a late
// write that lands after the successor's, a late write attempted): 95%,
// and one trial short of all of them at least, so that a small run (n = 15
// at the default scale) is not failed by one trial a busy machine
// scheduled differently. The safety checks allow no exception.
func mostTrials(n int) int { return n - max(1, n/20) }

// controls returns how many control trials go with n trials: a tenth, at
// least 1.
func controls(n int) int { return max(1, n/10) }

// count is one named figure of a scenario's line.
type count struct {
	name  string
	value string
}

// report is a scenario's result: its line, and the test's verdict on it.
type report struct {
	name       string
	trials     int
	violations int
	counts     []count
	fired      int
	controls   int
	start      time.Time
}

func newReport(name string, trials, controls int) *report {
	return &report{name: name, trials: trials, controls: controls, start: time.Now()}
}

// add appends a figure to the line.
func (r *report) add(name string, v any) { r.counts = append(r.counts, count{name, fmt.Sprint(v)}) }

// ratio appends a figure "n/of".
func (r *report) ratio(name string, n, of int) { r.add(name, fmt.Sprintf("%d/%d", n, of)) }

func (r *report) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: %s trials=%d violations=%d", r.name, r.trials, r.violations)
	for _, c := range r.counts {
		fmt.Fprintf(&b, " %s=%s", c.name, c.value)
	}
	if lead := r.wallLead(); lead >= time.Second {
		// The machine was suspended (or its wall clock stepped): every
		// process saw that much wall time pass at once.
		fmt.Fprintf(&b, " wall_clock_lead=%v", lead.Round(100*time.Millisecond))
	}
	fmt.Fprintf(&b, " control=fired %d/%d", r.fired, r.controls)
	return b.String()
}

// wallLead is how far the wall clock moved ahead of the monotonic clock
// since the report began: time a suspended virtual machine did not run
// (Linux's monotonic clock stops while suspended) or a step of the wall
// clock. Zero when they agree.
func (r *report) wallLead() time.Duration {
	return max(0, time.Now().Round(0).Sub(r.start.Round(0))-time.Since(r.start))
}

// finish prints the line on stdout (with the wall time on stderr) and fails
// the test unless there was no violation and every control fired.
func (r *report) finish(t *testing.T) {
	t.Helper()
	line := r.line()
	fmt.Fprintln(os.Stdout, line)
	fmt.Fprintf(os.Stderr, "chaos: %s done in %v (scale %g)\n", r.name, time.Since(r.start).Round(time.Second), scale())
	t.Log(line)
	require.Zero(t, r.violations, "violations: %s", line)
	require.Equal(t, r.controls, r.fired, "every control trial must show a violation: %s", line)
}

// progress prints "chaos: <name> i/n" on stderr, about 20 times a run.
type progress struct {
	name string
	n    int
	mu   sync.Mutex
	done int
}

func newProgress(name string, n int) *progress { return &progress{name: name, n: n} }

func (p *progress) step() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if every := max(1, p.n/20); p.done%every == 0 || p.done == p.n {
		fmt.Fprintf(os.Stderr, "chaos: %s %d/%d\n", p.name, p.done, p.n)
	}
}

// holderOf is what a lease's writes present to the sink: its lease name as
// the scope, its token and owner.
func holderOf(l *lease.Lease) fence.Holder { return l.Holder() }

// acquire is every acquisition of the harness: Acquire waiting until ctx
// ends; ctx is also the lease's lifetime.
func acquire(ctx context.Context, c *lease.Client, name string, ttl time.Duration) (*lease.Lease, error) {
	return c.Acquire(ctx, name, ttl, lease.WithLifetime(ctx))
}

// tryAcquire is every single attempt of the harness.
func tryAcquire(ctx context.Context, c *lease.Client, name string, ttl time.Duration) (*lease.Lease, error) {
	return c.TryAcquire(ctx, name, ttl, lease.WithLifetime(ctx))
}

// sink is the Postgres sink every scenario writes to: a register per
// resource (the last accepted value and token), an append-only log of
// accepted effects in commit order per resource, and a pgfence guard.
type sink struct {
	schema string
	guard  *pgfence.Guard
}

// newSink creates the sink's tables in a fresh schema, dropped when the
// test ends.
func newSink(t testing.TB, prefix string) (*sink, *pgxpool.Pool) {
	t.Helper()
	pool := shared.Pool(t)
	schema := shared.Schema(t, prefix)
	s, err := openSink(context.Background(), pool, schema, true)
	require.NoError(t, err)
	return s, pool
}

// openSink returns the sink in schema, creating its tables when create.
func openSink(ctx context.Context, db pgfence.DBTX, schema string, create bool) (*sink, error) {
	g, err := pgfence.New(pgfence.Options{Schema: schema})
	if err != nil {
		return nil, err
	}
	s := &sink{schema: schema, guard: g}
	if !create {
		return s, nil
	}
	if err := g.Migrate(ctx, db); err != nil {
		return nil, err
	}
	q := pgx.Identifier{schema}.Sanitize()
	_, err = db.Exec(ctx, `
CREATE TABLE IF NOT EXISTS `+q+`.register (resource text PRIMARY KEY, token bigint NOT NULL, owner text NOT NULL, value text NOT NULL);
CREATE TABLE IF NOT EXISTS `+q+`.effects (id bigserial PRIMARY KEY, resource text NOT NULL, token bigint NOT NULL, owner text NOT NULL, value text NOT NULL);
CREATE INDEX IF NOT EXISTS effects_resource ON `+q+`.effects (resource, id);`)
	return s, err
}

func (s *sink) table(name string) string { return pgx.Identifier{s.schema, name}.Sanitize() }

// beginner starts a transaction: a pool, a connection.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// beginnerDB is a database the sink writes to and reads from: a pool.
type beginnerDB interface {
	beginner
	pgfence.DBTX
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// write is every sink write of the harness: in one transaction, the fence
// check (unless guarded is false: the negative control), the effect, and
// the register. It returns nil when committed, an error matching
// fence.ErrStaleToken when refused.
func (s *sink) write(ctx context.Context, db beginner, resource string, h fence.Holder, value string, guarded bool) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	return s.writeIn(ctx, tx, resource, h, value, guarded)
}

// writeIn is write in a transaction already begun; it commits or rolls
// back tx.
func (s *sink) writeIn(ctx context.Context, tx pgx.Tx, resource string, h fence.Holder, value string, guarded bool) error {
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if guarded {
		if err := s.guard.Check(ctx, tx, resource, h); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.table("effects")+` (resource, token, owner, value) VALUES ($1, $2, $3, $4)`,
		resource, int64(h.Token), h.Owner, value); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.table("register")+` AS r (resource, token, owner, value) VALUES ($1, $2, $3, $4)
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, owner = EXCLUDED.owner, value = EXCLUDED.value`,
		resource, int64(h.Token), h.Owner, value); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// read returns the register of resource.
func (s *sink) read(ctx context.Context, db pgfence.DBTX, resource string) (value string, tok fence.Token, err error) {
	var t int64
	err = db.QueryRow(ctx, `SELECT value, token FROM `+s.table("register")+` WHERE resource = $1`, resource).Scan(&value, &t)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fence.None, nil
	}
	return value, fence.Token(t), err
}

// effect is one accepted write, in commit order.
type effect struct {
	token fence.Token
	owner string
	value string
}

// effects returns the accepted writes of resource in the order they were
// made.
func (s *sink) effects(ctx context.Context, db beginnerDB, resource string) ([]effect, error) {
	rows, err := db.Query(ctx, `SELECT token, owner, value FROM `+s.table("effects")+` WHERE resource = $1 ORDER BY id`, resource)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (effect, error) {
		var (
			e effect
			t int64
		)
		err := r.Scan(&t, &e.owner, &e.value)
		e.token = fence.Token(t)
		return e, err
	})
}

// staleAccepted counts the accepted writes of es that the fence rule
// refuses given the ones before them: a token below the highest accepted,
// or equal to it from another owner.
func staleAccepted(es []effect) int {
	n := 0
	var top fence.Token
	var topOwner string
	for _, e := range es {
		if !fence.Accept(top, topOwner, e.token, e.owner) {
			n++
			continue
		}
		top, topOwner = e.token, e.owner
	}
	return n
}

// isStale reports a refusal by the fence.
func isStale(err error) bool { return errors.Is(err, fence.ErrStaleToken) }

// trialCtx bounds one trial.
func trialCtx(t *testing.T, limit time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return ctx
}

// fastClient configures a go-redis client for the faults: short timeouts so
// a stopped server makes calls fail fast, no retries that would hide them.
func fastClient(o *redis.Options) {
	o.DialTimeout = 500 * time.Millisecond
	o.ReadTimeout = 300 * time.Millisecond
	o.WriteTimeout = 300 * time.Millisecond
	o.MaxRetries = -1
}

// testutilDone waits up to 10 s for ch to close.
func testutilDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	testwait.Done(t, ch, 10*time.Second, what)
}

// writeOnce is the idempotent effect of a scheduled run: in one
// transaction, the fence check on the guard row of key (the slot's
// idempotency key: under OverlapAllow each slot has a lease, and so a
// fence, of its own) and, unless resource already has an effect with key,
// the effect. guarded false is the negative control: a plain insert,
// neither fenced nor deduplicated. It reports whether it wrote.
func (s *sink) writeOnce(ctx context.Context, db beginner, resource, key string, h fence.Holder, guarded bool) (bool, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if guarded {
		if err := s.guard.Check(ctx, tx, key, h); err != nil {
			return false, err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.table("effects")+` WHERE resource = $1 AND value = $2)`, resource, key).Scan(&exists); err != nil {
			return false, err
		}
		if exists {
			return false, tx.Commit(ctx)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.table("effects")+` (resource, token, owner, value) VALUES ($1, $2, $3, $4)`,
		resource, int64(h.Token), h.Owner, key); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// lineReader reads lines from a worker's stdin.
type lineReader struct{ sc *bufio.Scanner }

func newLineReader(r io.Reader) *lineReader { return &lineReader{sc: bufio.NewScanner(r)} }

func (l *lineReader) next() (string, bool) {
	if !l.sc.Scan() {
		return "", false
	}
	return l.sc.Text(), true
}
