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

// runDemo starts the replicas, freezes the holder of the victim slot past
// its TTL, resumes it once another replica wrote with a newer token, and
// prints what the sink recorded. It returns the tally.
func runDemo(ctx context.Context, cfg demoConfig) (tally, error) {
	out := cfg.Out
	redisURL, pgURL := os.Getenv("REDIS_URL"), os.Getenv("DATABASE_URL")
	pgOnly := cfg.Backend == backendPostgres
	switch {
	case pgOnly && pgURL == "":
		return tally{}, errors.New("-backend postgres: set DATABASE_URL")
	case !pgOnly && (redisURL == "") != (pgURL == ""):
		return tally{}, errors.New("set both REDIS_URL and DATABASE_URL for real mode, or neither for embedded mode")
	}
	id := randomID()
	rc := replicaConfig{
		Prefix: "holdfast-demo:" + id + ":", Schema: "holdfast_demo_" + id,
		Slots: cfg.Slots, TTL: cfg.TTL, Work: cfg.Work, Unfenced: cfg.Unfenced,
	}
	var (
		sink store
		ldg  ledger.Ledger // the coordinator reads the replicas' ledger
	)
	if pgOnly {
		fmt.Fprintf(out, "mode: postgres alone (PostgreSQL %s: leases, ledger and sink in schema %s; no Redis)\n", redactURL(pgURL), rc.Schema)
		pg, err := openPG(ctx, pgURL, rc.Schema, cfg.Unfenced)
		if err != nil {
			return tally{}, err
		}
		defer pg.Close()
		if err := pg.migrate(ctx); err != nil {
			return tally{}, err
		}
		defer func() { _ = pg.dropSchema(context.WithoutCancel(ctx)) }()
		if err := migrateScheduling(ctx, pg); err != nil {
			return tally{}, err
		}
		if _, ldg, err = pgScheduling(pg, nil); err != nil {
			return tally{}, err
		}
		sink, rc.Backend, rc.PGURL = pg, backendPostgres, pgURL
	} else if redisURL != "" {
		fmt.Fprintf(out, "mode: real (Redis %s, PostgreSQL %s)\n", redactURL(redisURL), redactURL(pgURL))
		pg, err := openPG(ctx, pgURL, rc.Schema, cfg.Unfenced)
		if err != nil {
			return tally{}, err
		}
		defer pg.Close()
		if err := pg.migrate(ctx); err != nil {
			return tally{}, err
		}
		defer func() { _ = pg.dropSchema(context.WithoutCancel(ctx)) }()
		sink, rc.RedisURL, rc.PGURL = pg, redisURL, pgURL
		defer func() { _ = deleteKeys(context.WithoutCancel(ctx), redisURL, rc.Prefix) }()
	} else {
		fmt.Fprintln(out, "mode: embedded (miniredis on loopback, in-memory fenced store; set REDIS_URL and DATABASE_URL for real services)")
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return tally{}, err
		}
		miniconf.Register(mr) // CONFIG GET answers as a default Redis: noeviction
		defer mr.Close()
		// miniredis expires keys only when told time has passed: drive its
		// clock from ours, so lease TTLs run out as they would on Redis.
		stopClock := driveClock(mr)
		defer stopClock()
		mem := &memStore{unfenced: cfg.Unfenced}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return tally{}, err
		}
		srv := &http.Server{Handler: mem.handler(), ReadHeaderTimeout: 5 * time.Second}
		served := make(chan struct{})
		go func() { defer close(served); _ = srv.Serve(ln) }()
		defer func() { _ = srv.Close(); <-served }()
		sink, rc.RedisURL, rc.StoreURL = mem, "redis://"+mr.Addr(), "http://"+ln.Addr().String()
	}
	if cfg.Unfenced {
		fmt.Fprintln(out, "NEGATIVE CONTROL: the sink does not check fencing tokens")
	}

	// Slots start a little ahead so every replica is up for the first.
	rc.Start = time.Now().Truncate(time.Second).Add(3 * time.Second)
	slots := make([]time.Time, cfg.Slots)
	for i := range slots {
		slots[i] = rc.Start.Add(time.Duration(i) * time.Second).UTC()
	}
	victimSlot := slots[cfg.Victim]

	exe, err := os.Executable()
	if err != nil {
		return tally{}, err
	}
	events := make(chan event, 256)
	quit := make(chan struct{}) // readers drop what arrives after the demo ends
	defer close(quit)
	// The coordinator reads the replicas' ledger to tell a slot skipped by
	// policy from a missed one, and to show the victim slot's attempts.
	if ldg == nil {
		lopts, err := redis.ParseURL(rc.RedisURL)
		if err != nil {
			return tally{}, err
		}
		lrdb := redis.NewClient(lopts)
		defer lrdb.Close()
		if ldg, err = redisledger.New(lrdb, redisledger.Options{Prefix: rc.Prefix + "ledger:"}); err != nil {
			return tally{}, err
		}
	}

	var procs []*replicaProc
	defer func() { stopReplicas(procs) }()
	for i := range cfg.Replicas {
		rc.ID = fmt.Sprintf("r%d", i+1)
		p, err := startReplica(exe, rc, events, quit)
		if err != nil {
			return tally{}, err
		}
		procs = append(procs, p)
	}
	fmt.Fprintf(out, "%d replicas run job daily-settlement every second for %d slots from %s; lease TTL %v\n",
		cfg.Replicas, cfg.Slots, rc.Start.UTC().Format(time.TimeOnly), cfg.TTL)

	// The demo never hangs: past this bound it stops the replicas and
	// prints what the sink has, with the reason it did not finish.
	limit := cfg.Limit
	if limit <= 0 {
		limit = time.Duration(cfg.Slots)*time.Second + 35*time.Second
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	var (
		victim      *replicaProc
		victimToken fence.Token
		resumed     bool
		settled     = cfg.Fault != "stop" // stop: wait for the late write too
		replicaOf   = map[fence.Token]string{}
		unfinished  error // set when the bound passed first
	)
wait:
	for {
		select {
		case <-ctx.Done():
			return tally{}, ctx.Err()
		case <-deadline.C:
			unfinished = fmt.Errorf("demo did not finish within %v: %s", limit, pending(victim != nil, resumed, settled, cfg.Fault))
			break wait
		case ev := <-events:
			if ev.Ev == "run" {
				replicaOf[ev.Token] = ev.Replica
			}
			switch {
			case ev.Ev == "run" && victim == nil && cfg.Fault != "none" && ev.Slot.Equal(victimSlot):
				victim, victimToken = findProc(procs, ev.Replica), ev.Token
				if cfg.Fault == "kill" {
					if err := victim.kill(); err != nil {
						return tally{}, err
					}
					fmt.Fprintf(out, "killed %s (SIGKILL) in its run of slot %d, token %d; restarting it\n", ev.Replica, cfg.Victim+1, ev.Token)
					rc.ID = victim.id
					p, err := startReplica(exe, rc, events, quit)
					if err != nil {
						return tally{}, err
					}
					*victim = *p
					continue
				}
				if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					return tally{}, err
				}
				fmt.Fprintf(out, "froze %s (SIGSTOP) in its run of slot %d, token %d: a stop-the-world pause past the %v TTL\n",
					ev.Replica, cfg.Victim+1, ev.Token, cfg.TTL)
			case ev.Ev == "log":
				fmt.Fprintf(out, "  %s | %s\n", ev.Replica, ev.Result)
			case ev.Ev == "write" && cfg.Fault == "stop" && victim != nil && ev.Replica == victim.id && ev.Token == victimToken:
				settled = true
				fmt.Fprintf(out, "%s resumed and made its late write with token %d: %s\n", ev.Replica, ev.Token, ev.Result)
			}
		case <-poll.C:
		}
		if cfg.Fault == "stop" && victim != nil && !resumed {
			sctx, cancel := context.WithTimeout(ctx, sinkTimeout)
			cur, err := sink.MaxToken(sctx)
			cancel()
			if err != nil {
				return tally{}, err
			}
			if cur > victimToken {
				fmt.Fprintf(out, "another replica took over and wrote with token %d; resuming %s (SIGCONT)\n", cur, victim.id)
				if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
					return tally{}, err
				}
				resumed = true
			}
		}
		if settled && time.Now().After(slots[len(slots)-1]) {
			t, err := tallyNow(ctx, sink, ldg, slots)
			if err != nil {
				return tally{}, err
			}
			if t.missed == 0 {
				break wait
			}
		}
	}
	stopReplicas(procs)
	procs = nil

	sctx, cancel := context.WithTimeout(ctx, sinkTimeout)
	rep, err := sink.Report(sctx)
	cancel()
	if err != nil {
		return tally{}, err
	}
	lctx, cancel := context.WithTimeout(ctx, sinkTimeout)
	skipped, err := skippedSlots(lctx, ldg, rep, slots)
	cancel()
	if err != nil {
		fmt.Fprintf(out, "ledger: unreadable: %v\n", err)
	}
	t := measure(rep, slots, skipped)
	printTable(out, rep, slots)
	for i, s := range slots {
		if why, ok := t.skippedBy[s]; ok {
			fmt.Fprintf(out, "ledger: slot %d skipped by policy, reason %s (it came due while a run of the job was in progress)\n", i+1, why)
		}
	}
	if cfg.Fault != "none" {
		actx, cancel := context.WithTimeout(ctx, sinkTimeout)
		err := printAttempts(actx, out, ldg, victimSlot, cfg.Victim+1, replicaOf)
		cancel()
		if err != nil {
			fmt.Fprintf(out, "ledger: slot %d unreadable: %v\n", cfg.Victim+1, err)
		}
	}
	fmt.Fprintf(out, "summary: slots=%d ran_once=%d skipped=%d duplicates=%d missed=%d stale_rejected=%d\n",
		t.slots, t.ranOnce, t.skipped, t.duplicates, t.missed, t.staleRejected)
	if unfinished != nil {
		if t.missed > 0 {
			unfinished = fmt.Errorf("%w; slots with no accepted write: %v", unfinished, missedSlots(t, slots))
		}
		fmt.Fprintln(out, "FAILED:", unfinished)
		return t, unfinished
	}
	if cfg.Console {
		if err := serveConsole(ctx, out, rc, sink); err != nil {
			return t, fmt.Errorf("console: %w", err)
		}
	}
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
