package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
)

// pgBinDir holds initdb and postgres; HOLDFAST_PG_BIN overrides it.
const pgBinDir = "/usr/lib/postgresql/15/bin"

// pgProc is a PostgreSQL server of the test's own on a free loopback port,
// in a temporary data directory: the shared server is never restarted.
// Started as the postgres user when the test runs as root (postgres
// refuses to run as root).
type pgProc struct {
	bin, dir, data string
	port           int
	cred           *syscall.Credential
	cmd            *exec.Cmd
	exited         chan struct{}
}

// startPostgres initdbs a cluster and starts it, or skips the test when the
// binaries are not installed (or with HOLDFAST_SKIP_INTEGRATION=1). Cleanup stops it and removes the directory.
func startPostgres(t *testing.T) *pgProc {
	t.Helper()
	if os.Getenv("HOLDFAST_SKIP_INTEGRATION") == "1" {
		t.Skip("HOLDFAST_SKIP_INTEGRATION=1")
	}
	bin := os.Getenv("HOLDFAST_PG_BIN")
	if bin == "" {
		bin = pgBinDir
	}
	if _, err := os.Stat(filepath.Join(bin, "postgres")); err != nil {
		t.Skipf("no PostgreSQL server binaries in %s (set HOLDFAST_PG_BIN): %v", bin, err)
	}
	dir, err := os.MkdirTemp("", "holdfast-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &pgProc{bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root and no postgres user to run the server as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	out, err := p.command("initdb", "-D", p.data, "-U", "holdfast", "--auth=trust", "--no-sync", "-E", "UTF8").CombinedOutput()
	require.NoError(t, err, "initdb: %s", out)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.port = l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	p.start(t)
	t.Cleanup(func() { p.stop(syscall.SIGQUIT) })
	return p
}

func (p *pgProc) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Setpgid: true}
	return cmd
}

// start runs the postmaster and waits until it accepts connections. fsync
// is off: the fault is a crash of the server's processes, not of the
// machine, and a commit is written to the WAL in the kernel before it is
// acknowledged either way.
func (p *pgProc) start(t *testing.T) {
	t.Helper()
	log, err := os.OpenFile(filepath.Join(p.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer log.Close()
	p.cmd = p.command("postgres", "-D", p.data, "-p", strconv.Itoa(p.port), "-k", p.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=40", "-c", "fsync=off",
		"-c", "shared_buffers=16MB")
	p.cmd.Stdout, p.cmd.Stderr = log, log
	require.NoError(t, p.cmd.Start())
	p.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(p.cmd, p.exited)
	testwait.Until(t, 30*time.Second, "the private postgres accepts connections", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, p.url())
		if err != nil {
			return false
		}
		_ = conn.Close(ctx)
		return true
	})
}

// stop sends sig to the postmaster (SIGQUIT: immediate shutdown, every
// backend killed without a checkpoint, as in a crash; the next start runs
// crash recovery) and waits for it to exit.
func (p *pgProc) stop(sig syscall.Signal) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// restart crashes the server (immediate shutdown) and starts it again.
func (p *pgProc) restart(t *testing.T) {
	t.Helper()
	p.stop(syscall.SIGQUIT)
	p.start(t)
}

func (p *pgProc) url() string {
	return fmt.Sprintf("postgres://holdfast@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", p.port)
}

// openTx counts the transactions open on the server, holdfast's (the
// ledger's) and the sink's.
type openTx struct{ n atomic.Int64 }

// slowLedgerDB is the ledger's database: each of its transactions stays
// open 10 ms longer before COMMIT (pg_sleep on the server), so that a crash
// finds ledger transactions open, and counts as open meanwhile.
type slowLedgerDB struct {
	*pgxpool.Pool
	open *openTx
}

func (d slowLedgerDB) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := d.Pool.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	d.open.n.Add(1)
	return &slowTx{Tx: tx, open: d.open}, nil
}

type slowTx struct {
	pgx.Tx
	open *openTx
	done atomic.Bool
}

func (t *slowTx) end() {
	if t.done.CompareAndSwap(false, true) {
		t.open.n.Add(-1)
	}
}

func (t *slowTx) Commit(ctx context.Context) error {
	defer t.end()
	if _, err := t.Exec(ctx, `SELECT pg_sleep(0.01)`); err != nil {
		return err
	}
	return t.Tx.Commit(ctx)
}

func (t *slowTx) Rollback(ctx context.Context) error {
	defer t.end()
	return t.Tx.Rollback(ctx)
}

// pgRestartSink is the scenario's sink: per slot, an effect and a mark, two
// rows that belong together, written by one transaction with the fence
// check and a deduplication on the slot's key (guarded), held open 30 ms
// between them; or (the negative control) as two statements of their own
// with no deduplication, retried as a whole on an error.
type pgRestartSink struct {
	*sink
	pool *pgxpool.Pool
	open *openTx
	// between is called between the two rows: the moment the crash is
	// aimed at.
	between func()
}

func (s pgRestartSink) write(ctx context.Context, key string, h fence.Holder, guarded bool) error {
	if !guarded {
		if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.table("effects")+` (resource, token, owner, value) VALUES ('slots', $1, $2, $3)`,
			int64(h.Token), h.Owner, key); err != nil {
			return err
		}
		s.between()
		if _, err := s.pool.Exec(ctx, `SELECT pg_sleep(0.03)`); err != nil {
			return err
		}
		_, err := s.pool.Exec(ctx, `INSERT INTO `+s.table("marks")+` (key) VALUES ($1)`, key)
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	s.open.n.Add(1)
	defer s.open.n.Add(-1)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := s.guard.Check(ctx, tx, key, h); err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+s.table("effects")+` WHERE value = $1)`, key).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.table("effects")+` (resource, token, owner, value) VALUES ('slots', $1, $2, $3)`,
		int64(h.Token), h.Owner, key); err != nil {
		return err
	}
	s.between()
	if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.03)`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.table("marks")+` (key) VALUES ($1)`, key); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// pgRestartResult is one trial's findings.
type pgRestartResult struct {
	slots, lost, twice, halfWritten int
	// sinkOpen and ledgerOpen are the transactions open when the server
	// was crashed.
	sinkOpen, ledgerOpen int64
}

func (r pgRestartResult) violations() int { return r.lost + r.twice + r.halfWritten }

// TestPostgresRestartedWhileTransactionsAreOpen: per trial, 4 workers run
// slots as the scheduler does (pgledger Begin, the effect through the
// sink, pgledger Finish; each step retried after an error until it
// succeeds), each sink transaction held open 30 ms between its two rows
// and each ledger transaction 10 ms before COMMIT; after a few slots, the
// moment a sink write is between its two rows while a ledger transaction
// is open, the PostgreSQL server (a
// private one) is crashed (immediate shutdown) and started again, and the
// workers carry on until every slot is done. Then
// every slot must be succeeded in the ledger (none lost) with exactly one
// effect (none twice) and its mark (nothing half-written).
// open_at_restart counts the trials whose crash found both sink and ledger
// transactions open (sink_tx_open, ledger_tx_open: how many in all).
// Control: the sink writes its two rows as statements of their own without
// deduplication: a crash between them leaves an effect without its mark,
// and the retry writes the effect again.
func TestPostgresRestartedWhileTransactionsAreOpen(t *testing.T) {
	t.Parallel()
	const name = "pg-restart"
	n := trials(20)
	r := newReport(name, n, controls(n))
	srv := startPostgres(t)
	bar := newProgress(name, n+r.controls)

	var total pgRestartResult
	hit := 0 // trials whose crash found sink and ledger transactions open
	for i := range n {
		res := pgRestartTrial(t, srv, i, true)
		total.slots += res.slots
		total.lost += res.lost
		total.twice += res.twice
		total.halfWritten += res.halfWritten
		total.sinkOpen += res.sinkOpen
		total.ledgerOpen += res.ledgerOpen
		if res.sinkOpen > 0 && res.ledgerOpen > 0 {
			hit++
		}
		r.violations += res.violations()
		bar.step()
	}
	for i := range r.controls {
		if res := pgRestartTrial(t, srv, n+i, false); res.twice+res.halfWritten > 0 {
			r.fired++
		}
		bar.step()
	}
	r.add("slots", total.slots)
	r.add("lost", total.lost)
	r.add("twice", total.twice)
	r.add("half_written", total.halfWritten)
	r.ratio("open_at_restart", hit, n)
	r.add("sink_tx_open", total.sinkOpen)
	r.add("ledger_tx_open", total.ledgerOpen)
	r.finish(t)
	require.GreaterOrEqual(t, hit, mostTrials(n), "the crash must find sink and ledger transactions open")
}

// pgRestartTrial runs one trial in a schema of its own on srv.
func pgRestartTrial(t *testing.T, srv *pgProc, trial int, guarded bool) pgRestartResult {
	t.Helper()
	const (
		workers = 4
		perW    = 12 // slots per worker
		restart = 6  // slots done before the crash
	)
	ctx := trialCtx(t, 2*time.Minute)
	cfg, err := pgxpool.ParseConfig(srv.url())
	require.NoError(t, err)
	cfg.MaxConns = 2 * workers
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()

	schema := fmt.Sprintf("pgrestart_%d", trial)
	s, err := openSink(ctx, pool, schema, true)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE `+s.table("marks")+` (key text NOT NULL)`)
	require.NoError(t, err)
	open, ledgerOpen := &openTx{}, &openTx{}
	led, err := pgledger.New(slowLedgerDB{pool, ledgerOpen}, pgledger.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, led.Migrate(ctx))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var done atomic.Int64
	// ready is closed by the first sink write between its rows, after
	// restart slots, while a ledger transaction is open.
	ready := make(chan struct{})
	var readyOnce sync.Once
	sk := pgRestartSink{sink: s, pool: pool, open: open, between: func() {
		if done.Load() >= restart && ledgerOpen.n.Load() > 0 {
			readyOnce.Do(func() { close(ready) })
		}
	}}

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			part := fmt.Sprintf("p%d", w)
			f := ledger.Fence{Scope: ledger.UnitScope("job", part), Token: fence.Token(1_700_000_000_000_000 + w), Owner: fmt.Sprintf("worker-%d", w)}
			h := fence.Holder{Scope: "slots", Token: f.Token, Owner: f.Owner}
			for i := range perW {
				slot := ledger.Slot{Job: "job", Partition: part, At: base.Add(time.Duration(i) * time.Second)}
				if !runSlot(ctx, led, sk, slot, f, h, guarded) {
					return // ctx ended: the slot is counted lost below
				}
				done.Add(1)
			}
		})
	}
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatalf("trial %d: no progress before the crash", trial)
	}
	sinkOpen, ledgerOpenAt := open.n.Load(), ledgerOpen.n.Load()
	srv.restart(t)
	wg.Wait()

	// The findings, read on a fresh connection.
	res := pgRestartResult{slots: workers * perW, sinkOpen: sinkOpen, ledgerOpen: ledgerOpenAt}
	check, err := pgx.Connect(ctx, srv.url())
	require.NoError(t, err)
	defer func() { _ = check.Close(context.Background()) }()
	for w := range workers {
		part := fmt.Sprintf("p%d", w)
		for i := range perW {
			slot := ledger.Slot{Job: "job", Partition: part, At: base.Add(time.Duration(i) * time.Second)}
			rec, ok, err := led.Get(ctx, slot)
			require.NoError(t, err)
			var effects, marks int
			require.NoError(t, check.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+s.table("effects")+` WHERE value = $1),
				(SELECT count(*) FROM `+s.table("marks")+` WHERE key = $1)`, slot.Key()).Scan(&effects, &marks))
			switch {
			case !ok || rec.Status != ledger.StatusSucceeded || effects == 0:
				res.lost++
			case effects > 1:
				res.twice++
			}
			if marks != effects {
				res.halfWritten++
			}
		}
	}
	if guarded && res.violations() > 0 {
		t.Logf("trial %d: %+v (server log: %s)", trial, res, filepath.Join(srv.dir, "server.log"))
	}
	return res
}

// runSlot runs one slot to its end (Begin, the effect, Finish succeeded),
// each step retried after an error until it succeeds or ctx ends. It
// reports false when ctx ended first.
func runSlot(ctx context.Context, led *pgledger.Ledger, sk pgRestartSink, slot ledger.Slot, f ledger.Fence, h fence.Holder, guarded bool) bool {
	var attempt int
	steps := []func() error{
		func() (err error) {
			attempt, _, err = led.Begin(ctx, slot, f, 1000, time.Now())
			return err
		},
		func() error { return sk.write(ctx, slot.Key(), h, guarded) },
		func() error {
			return led.Finish(ctx, slot, f, attempt, ledger.Outcome{Status: ledger.StatusSucceeded}, time.Now())
		},
	}
	for i, step := range steps {
		for {
			err := step()
			if i == 0 && errors.Is(err, ledger.ErrSlotDone) {
				return true // finished before a lost reply
			}
			if err == nil {
				break
			}
			wait := time.NewTimer(20 * time.Millisecond)
			select {
			case <-ctx.Done():
				wait.Stop()
				return false
			case <-wait.C:
			}
		}
	}
	return true
}
