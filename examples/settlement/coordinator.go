package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// demoConfig sets the scenario.
type demoConfig struct {
	Replicas int
	Backend  string // redis or backendPostgres
	Slots    int
	Victim   int    // the holder of this slot (0-based) meets the fault
	Fault    string // stop (SIGSTOP, then SIGCONT), kill (SIGKILL, then restart) or none
	TTL      time.Duration
	Work     time.Duration
	Unfenced bool // negative control: the sink does not check tokens
	// Trace, when not empty, has each replica write its spans to
	// Trace.<replica> (traceProvider).
	Trace string
	// Console keeps the demo running after its summary, serving the admin
	// console (serveConsole) until ctx ends.
	Console bool
	// Limit bounds the whole run; 0: the slots plus 35 s.
	Limit time.Duration
	Out   io.Writer
}

// sinkTimeout bounds each call the coordinator makes to the sink or the
// ledger, so that a hung service ends the demo with its error instead of
// hanging it.
const sinkTimeout = 10 * time.Second

// replicaProc is a running replica process.
type replicaProc struct {
	id  string
	cmd *exec.Cmd
}

// runDemo tells the story in four screens: setup (the services and the
// ledger), the replicas, the fault (a replica frozen or killed in its run
// of the victim slot, resumed once another wrote with a newer token) and
// the summary of what the sink recorded. It returns the tally.
func runDemo(ctx context.Context, cfg demoConfig) (tally, error) {
	d := &demo{cfg: cfg, out: cfg.Out}
	defer d.close()
	if err := d.setup(ctx); err != nil {
		return tally{}, err
	}
	if err := d.startReplicas(); err != nil {
		return tally{}, err
	}
	w, err := d.watchFault(ctx)
	if err != nil {
		return tally{}, err
	}
	d.stopReplicas()
	t, err := d.summarize(ctx, w)
	if err != nil {
		return tally{}, err
	}
	if w.unfinished != nil {
		unfinished := w.unfinished
		if t.missed > 0 {
			unfinished = fmt.Errorf("%w; slots with no accepted write: %v", unfinished, missedSlots(t, d.slots))
		}
		fmt.Fprintln(d.out, "FAILED:", unfinished)
		return t, unfinished
	}
	if cfg.Console {
		if err := serveConsole(ctx, d.out, d.rc, d.sink); err != nil {
			return t, fmt.Errorf("console: %w", err)
		}
	}
	return t, nil
}

// demo is one run of the scenario: its services, its replicas and the
// cleanups that undo them.
type demo struct {
	cfg    demoConfig
	out    io.Writer
	rc     replicaConfig // what each replica is started with
	sink   store
	ldg    ledger.Ledger // the coordinator reads the replicas' ledger
	slots  []time.Time
	exe    string
	events chan event
	quit   chan struct{} // readers drop what arrives after the demo ends
	procs  []*replicaProc
	undo   []func() // run last first by close
}

// deferUndo adds a cleanup that close runs, the last added first.
func (d *demo) deferUndo(f func()) { d.undo = append(d.undo, f) }

// close runs the cleanups, the last added first.
func (d *demo) close() {
	for i := len(d.undo) - 1; i >= 0; i-- {
		d.undo[i]()
	}
}

// setup opens the services of the chosen mode (postgres alone, real Redis
// and PostgreSQL, or embedded), plans the slots and opens the ledger the
// coordinator reads to tell a slot skipped by policy from a missed one,
// and to show the victim slot's attempts.
func (d *demo) setup(ctx context.Context) error {
	redisURL, pgURL := os.Getenv("REDIS_URL"), os.Getenv("DATABASE_URL")
	pgOnly := d.cfg.Backend == backendPostgres
	switch {
	case pgOnly && pgURL == "":
		return errors.New("-backend postgres: set DATABASE_URL")
	case !pgOnly && (redisURL == "") != (pgURL == ""):
		return errors.New("set both REDIS_URL and DATABASE_URL for real mode, or neither for embedded mode")
	}
	id := randomID()
	d.rc = replicaConfig{
		Prefix: "holdfast-demo:" + id + ":", Schema: "holdfast_demo_" + id,
		Slots: d.cfg.Slots, TTL: d.cfg.TTL, Work: d.cfg.Work, Unfenced: d.cfg.Unfenced,
		Trace: d.cfg.Trace,
	}
	var err error
	switch {
	case pgOnly:
		err = d.setupPostgres(ctx, pgURL)
	case redisURL != "":
		err = d.setupReal(ctx, redisURL, pgURL)
	default:
		err = d.setupEmbedded()
	}
	if err != nil {
		return err
	}
	if d.cfg.Unfenced {
		fmt.Fprintln(d.out, "NEGATIVE CONTROL: the sink does not check fencing tokens")
	}
	// Slots start a little ahead so every replica is up for the first.
	d.rc.Start = time.Now().Truncate(time.Second).Add(3 * time.Second)
	d.slots = make([]time.Time, d.cfg.Slots)
	for i := range d.slots {
		d.slots[i] = d.rc.Start.Add(time.Duration(i) * time.Second).UTC()
	}
	if d.exe, err = os.Executable(); err != nil {
		return err
	}
	d.events, d.quit = make(chan event, 256), make(chan struct{})
	d.deferUndo(func() { close(d.quit) })
	if d.ldg == nil {
		return d.openRedisLedger()
	}
	return nil
}

// setupPostgres: leases, ledger and sink in one PostgreSQL schema.
func (d *demo) setupPostgres(ctx context.Context, pgURL string) error {
	fmt.Fprintf(d.out, "mode: postgres alone (PostgreSQL %s: leases, ledger and sink in schema %s; no Redis)\n", redactURL(pgURL), d.rc.Schema)
	pg, err := d.openSink(ctx, pgURL)
	if err != nil {
		return err
	}
	if err := migrateScheduling(ctx, pg); err != nil {
		return err
	}
	if _, _, d.ldg, err = pgScheduling(pg, nil); err != nil {
		return err
	}
	d.rc.Backend, d.rc.PGURL = backendPostgres, pgURL
	return nil
}

// setupReal: leases and ledger on a real Redis, the sink on PostgreSQL.
func (d *demo) setupReal(ctx context.Context, redisURL, pgURL string) error {
	fmt.Fprintf(d.out, "mode: real (Redis %s, PostgreSQL %s)\n", redactURL(redisURL), redactURL(pgURL))
	if _, err := d.openSink(ctx, pgURL); err != nil {
		return err
	}
	d.rc.RedisURL, d.rc.PGURL = redisURL, pgURL
	d.deferUndo(func() { _ = deleteKeys(context.WithoutCancel(ctx), redisURL, d.rc.Prefix) })
	return nil
}

// openSink opens the PostgreSQL sink in the demo's schema and migrates it;
// close drops the schema.
func (d *demo) openSink(ctx context.Context, pgURL string) (*pgStore, error) {
	pg, err := openPG(ctx, pgURL, d.rc.Schema, d.cfg.Unfenced)
	if err != nil {
		return nil, err
	}
	d.deferUndo(pg.Close)
	if err := pg.migrate(ctx); err != nil {
		return nil, err
	}
	d.deferUndo(func() { _ = pg.dropSchema(context.WithoutCancel(ctx)) })
	d.sink = pg
	return pg, nil
}

// setupEmbedded: miniredis on loopback and the in-memory fenced store
// served over HTTP to the replicas.
func (d *demo) setupEmbedded() error {
	fmt.Fprintln(d.out, "mode: embedded (miniredis on loopback, in-memory fenced store; set REDIS_URL and DATABASE_URL for real services)")
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return err
	}
	miniconf.Register(mr) // CONFIG GET answers as a default Redis: noeviction
	d.deferUndo(mr.Close)
	// miniredis expires keys only when told time has passed: drive its
	// clock from ours, so lease TTLs run out as they would on Redis.
	d.deferUndo(driveClock(mr))
	mem := &memStore{unfenced: d.cfg.Unfenced}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mem.handler(), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	d.deferUndo(func() { _ = srv.Close(); <-served })
	d.sink, d.rc.RedisURL, d.rc.StoreURL = mem, "redis://"+mr.Addr(), "http://"+ln.Addr().String()
	return nil
}

// openRedisLedger opens the replicas' Redis ledger for the coordinator.
func (d *demo) openRedisLedger() error {
	opts, err := redis.ParseURL(d.rc.RedisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	d.deferUndo(func() { _ = rdb.Close() })
	d.ldg, err = redisledger.New(rdb, redisledger.Options{Prefix: d.rc.Prefix + "ledger:"})
	return err
}

// startReplicas starts the replica processes; close stops them.
func (d *demo) startReplicas() error {
	d.deferUndo(d.stopReplicas)
	for i := range d.cfg.Replicas {
		rc := d.rc
		rc.ID = fmt.Sprintf("r%d", i+1)
		p, err := startReplica(d.exe, rc, d.events, d.quit)
		if err != nil {
			return err
		}
		d.procs = append(d.procs, p)
	}
	fmt.Fprintf(d.out, "%d replicas run job daily-settlement every second for %d slots from %s; lease TTL %v\n",
		d.cfg.Replicas, d.cfg.Slots, d.rc.Start.UTC().Format(time.TimeOnly), d.cfg.TTL)
	return nil
}

// stopReplicas stops the replicas still running (see stopReplicas).
func (d *demo) stopReplicas() {
	stopReplicas(d.procs)
	d.procs = nil
}

// faultWatch is what the coordinator has seen of the fault.
type faultWatch struct {
	victim    *replicaProc // the holder of the victim slot, once it ran
	slot      int          // the victim slot's index: -victim's, or the first run after it when that one was skipped
	token     fence.Token  // the victim's token for that slot
	resumed   bool         // stop: the frozen victim was sent SIGCONT
	settled   bool         // stop: the resumed victim made its late write
	replicaOf map[fence.Token]string
	// unfinished says what was still awaited when the bound passed.
	unfinished error
}

// watchFault follows the replicas' events: it strikes the holder of the
// victim slot, resumes a frozen one once another replica wrote with a
// newer token, and returns when every slot is accounted for. The demo
// never hangs: past the bound (cfg.Limit, default the slots + 35 s) it
// returns with unfinished set.
func (d *demo) watchFault(ctx context.Context) (*faultWatch, error) {
	w := &faultWatch{slot: d.cfg.Victim, settled: d.cfg.Fault != "stop", replicaOf: map[fence.Token]string{}}
	limit := d.cfg.Limit
	if limit <= 0 {
		limit = time.Duration(d.cfg.Slots)*time.Second + 35*time.Second
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			w.unfinished = fmt.Errorf("demo did not finish within %v: %s", limit, pending(w.victim != nil, w.resumed, w.settled, d.cfg.Fault))
			return w, nil
		case ev := <-d.events:
			if err := d.onEvent(w, ev); err != nil {
				return nil, err
			}
		case <-poll.C:
		}
		if err := d.resumeIfOvertaken(ctx, w); err != nil {
			return nil, err
		}
		if done, err := d.allAccounted(ctx, w); err != nil || done {
			return w, err
		}
	}
}

// onEvent handles one replica event: the victim slot's run meets the
// fault, log lines are shown, and the victim's late write settles it.
func (d *demo) onEvent(w *faultWatch, ev event) error {
	switch {
	case ev.Ev == "run":
		w.replicaOf[ev.Token] = ev.Replica
		// The first run at or after the -victim slot: on a busy host that
		// slot may have been skipped (the run before it still going).
		if w.victim == nil && d.cfg.Fault != "none" && !ev.Slot.Before(d.slots[d.cfg.Victim]) {
			w.slot = slices.IndexFunc(d.slots, ev.Slot.Equal)
			return d.strike(w, ev)
		}
	case ev.Ev == "log":
		fmt.Fprintf(d.out, "  %s | %s\n", ev.Replica, ev.Result)
	case ev.Ev == "write" && d.cfg.Fault == "stop" && w.victim != nil && ev.Replica == w.victim.id && ev.Token == w.token:
		w.settled = true
		fmt.Fprintf(d.out, "%s resumed and made its late write with token %d: %s\n", ev.Replica, ev.Token, ev.Result)
	}
	return nil
}

// strike freezes (SIGSTOP) the replica in its run of the victim slot, or
// kills it (SIGKILL) and starts it again.
func (d *demo) strike(w *faultWatch, ev event) error {
	w.victim, w.token = findProc(d.procs, ev.Replica), ev.Token
	if d.cfg.Fault == "kill" {
		if err := w.victim.kill(); err != nil {
			return err
		}
		fmt.Fprintf(d.out, "killed %s (SIGKILL) in its run of slot %d, token %d; restarting it\n", ev.Replica, w.slot+1, ev.Token)
		rc := d.rc
		rc.ID = w.victim.id
		p, err := startReplica(d.exe, rc, d.events, d.quit)
		if err != nil {
			return err
		}
		*w.victim = *p
		return nil
	}
	if err := w.victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "froze %s (SIGSTOP) in its run of slot %d, token %d: a stop-the-world pause past the %v TTL\n",
		ev.Replica, w.slot+1, ev.Token, d.cfg.TTL)
	return nil
}

// resumeIfOvertaken sends SIGCONT to the frozen victim once the sink holds
// a newer token than the victim's: another replica took over.
func (d *demo) resumeIfOvertaken(ctx context.Context, w *faultWatch) error {
	if d.cfg.Fault != "stop" || w.victim == nil || w.resumed {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, sinkTimeout)
	cur, err := d.sink.MaxToken(sctx)
	cancel()
	if err != nil || cur <= w.token {
		return err
	}
	fmt.Fprintf(d.out, "another replica took over and wrote with token %d; resuming %s (SIGCONT)\n", cur, w.victim.id)
	if err := w.victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	w.resumed = true
	return nil
}

// allAccounted reports whether the fault has settled, the last slot has
// passed and every slot has an accepted write or a skip by policy.
func (d *demo) allAccounted(ctx context.Context, w *faultWatch) (bool, error) {
	if !w.settled || !time.Now().After(d.slots[len(d.slots)-1]) {
		return false, nil
	}
	t, err := tallyNow(ctx, d.sink, d.ldg, d.slots)
	if err != nil {
		return false, err
	}
	return t.missed == 0, nil
}

// summarize prints the sink's table, the slots the ledger skipped by
// policy, the victim slot's attempts and the summary line, and returns
// the tally.
func (d *demo) summarize(ctx context.Context, w *faultWatch) (tally, error) {
	sctx, cancel := context.WithTimeout(ctx, sinkTimeout)
	rep, err := d.sink.Report(sctx)
	cancel()
	if err != nil {
		return tally{}, err
	}
	lctx, cancel := context.WithTimeout(ctx, sinkTimeout)
	skipped, err := skippedSlots(lctx, d.ldg, rep, d.slots)
	cancel()
	if err != nil {
		fmt.Fprintf(d.out, "ledger: unreadable: %v\n", err)
	}
	t := measure(rep, d.slots, skipped)
	printTable(d.out, rep, d.slots)
	for i, s := range d.slots {
		if why, ok := t.skippedBy[s]; ok {
			fmt.Fprintf(d.out, "ledger: slot %d skipped by policy, reason %s (it came due while a run of the job was in progress)\n", i+1, why)
		}
	}
	if d.cfg.Fault != "none" {
		actx, cancel := context.WithTimeout(ctx, sinkTimeout)
		err := printAttempts(actx, d.out, d.ldg, d.slots[w.slot], w.slot+1, w.replicaOf)
		cancel()
		if err != nil {
			fmt.Fprintf(d.out, "ledger: slot %d unreadable: %v\n", w.slot+1, err)
		}
	}
	fmt.Fprintf(d.out, "summary: slots=%d ran_once=%d skipped=%d duplicates=%d missed=%d stale_rejected=%d\n",
		t.slots, t.ranOnce, t.skipped, t.duplicates, t.missed, t.staleRejected)
	return t, nil
}

// tallyNow measures the sink and the ledger as they are now.
func tallyNow(ctx context.Context, sink store, ldg ledger.Ledger, slots []time.Time) (tally, error) {
	ctx, cancel := context.WithTimeout(ctx, sinkTimeout)
	defer cancel()
	rep, err := sink.Report(ctx)
	if err != nil {
		return tally{}, err
	}
	skipped, err := skippedSlots(ctx, ldg, rep, slots)
	if err != nil {
		return tally{}, err
	}
	return measure(rep, slots, skipped), nil
}

// skippedSlots returns, for the slots without a row in rep, the ledger's
// reason for those it recorded skipped.
func skippedSlots(ctx context.Context, ldg ledger.Ledger, rep report, slots []time.Time) (map[time.Time]string, error) {
	written := map[time.Time]bool{}
	for _, r := range rep.Rows {
		written[r.Slot.UTC()] = true
	}
	out := map[time.Time]string{}
	for _, s := range slots {
		if written[s] {
			continue
		}
		rec, ok, err := ldg.Get(ctx, ledger.Slot{Job: "daily-settlement", At: s})
		if err != nil {
			return nil, err
		}
		if ok && rec.Status == ledger.StatusSkipped {
			out[s] = rec.Reason
		}
	}
	return out, nil
}

// pending says what the demo was still waiting for when its bound passed.
func pending(victimSeen, resumed, settled bool, fault string) string {
	switch {
	case fault != "none" && !victimSeen:
		return "the victim slot never ran"
	case fault == "stop" && !resumed:
		return "no other replica wrote with a newer token while the victim was frozen"
	case !settled:
		return "the resumed victim never made its late write"
	}
	return "some slots have no accepted write"
}

// missedSlots lists the 1-based numbers of the slots without a row.
func missedSlots(t tally, slots []time.Time) []int {
	var out []int
	for i, s := range slots {
		if len(t.perSlot[s]) == 0 {
			out = append(out, i+1)
		}
	}
	return out
}

func printTable(out io.Writer, rep report, slots []time.Time) {
	index := map[time.Time]int{}
	for i, s := range slots {
		index[s] = i + 1
	}
	var all []row
	all = append(all, rep.Rows...)
	for _, r := range rep.Rejections {
		r.Replica += "*"
		all = append(all, r)
	}
	sortRows(all)
	fmt.Fprintf(out, "%-4s  %-20s  %-7s  %-18s  %s\n", "slot", "scheduled (UTC)", "replica", "token", "result")
	for _, r := range all {
		result := "accepted"
		if strings.HasSuffix(r.Replica, "*") {
			result = fmt.Sprintf("stale: rejected, sink holds %d", r.Current)
		}
		fmt.Fprintf(out, "%-4d  %-20s  %-7s  %-18d  %s\n", index[r.Slot.UTC()], r.Slot.UTC().Format(time.RFC3339),
			strings.TrimSuffix(r.Replica, "*"), r.Token, result)
	}
}

// startReplica starts one replica process. Its stdout events and its
// stderr log lines (as "log" events) go to events until quit is closed.
func startReplica(exe string, rc replicaConfig, events chan<- event, quit <-chan struct{}) (*replicaProc, error) {
	args := []string{"-replica", rc.ID, "-replica-backend", rc.Backend,
		"-redis", rc.RedisURL, "-store", rc.StoreURL, "-pg", rc.PGURL, "-schema", rc.Schema,
		"-prefix", rc.Prefix, "-start", rc.Start.UTC().Format(time.RFC3339), "-slots", fmt.Sprint(rc.Slots),
		"-ttl", rc.TTL.String(), "-work", rc.Work.String()}
	if rc.Unfenced {
		args = append(args, "-unfenced")
	}
	if rc.Trace != "" {
		args = append(args, "-trace", rc.Trace)
	}
	cmd := exec.Command(exe, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	send := func(ev event) {
		select {
		case events <- ev:
		case <-quit:
		}
	}
	// Both readers end when the process exits and its pipes close.
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				send(ev)
			}
		}
	}()
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			send(event{Ev: "log", Replica: rc.ID, Result: sc.Text()})
		}
	}()
	return &replicaProc{id: rc.ID, cmd: cmd}, nil
}

// stopReplicas sends SIGCONT (a frozen one must be able to stop) and
// SIGTERM to each replica, and waits for it, killing it after 10 s.
func stopReplicas(procs []*replicaProc) {
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
}

func findProc(procs []*replicaProc, id string) *replicaProc {
	for _, p := range procs {
		if p.id == id {
			return p
		}
	}
	return nil
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// redactURL drops the password from a service URL before printing it.
func redactURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.LastIndex(u, "@"); j > i {
			if k := strings.Index(u[i+3:j], ":"); k >= 0 {
				return u[:i+3+k] + ":***" + u[j:]
			}
		}
	}
	return u
}

// driveClock advances mr's key expiry with the wall clock every 5 ms until
// the returned function is called; it waits for its goroutine.
func driveClock(mr *miniredis.Miniredis) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-quit:
				return
			case now := <-tick.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return func() { close(quit); <-done }
}

// deleteKeys removes the demo's keys from a real Redis.
func deleteKeys(ctx context.Context, url, prefix string) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}

// kill sends SIGKILL and waits for the process.
func (p *replicaProc) kill() error {
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	_ = p.cmd.Wait()
	return nil
}

// printAttempts prints the ledger's attempts of the victim's slot.
func printAttempts(ctx context.Context, out io.Writer, ldg ledger.Ledger, at time.Time, n int, replicaOf map[fence.Token]string) error {
	rec, _, err := ldg.Get(ctx, ledger.Slot{Job: "daily-settlement", At: at})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ledger: slot %d %s", n, rec.Status)
	for _, a := range rec.Attempts {
		fmt.Fprintf(out, ", attempt %d %s by %s", a.N, a.Status, replicaOf[a.Token])
	}
	fmt.Fprintln(out)
	return nil
}
