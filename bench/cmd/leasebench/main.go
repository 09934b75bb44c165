// Command leasebench measures holdfast's lease against a hand-written
// minimal lease ("ideal"), redsync, bsm/redislock and the ideal with
// holdfast's clock floor on the token ("ideal_floor") on one Redis, in one
// run, with the contenders interleaved round by round (call by call at one
// goroutine), and prints one line per scenario (see bench/README.md),
// first on the host as it is, then again (prefixed "loaded_") with two
// CPU-bound busy loops of its own running beside it, then (prefixed
// "latency250_") with every contender through one loopback proxy that
// adds 125 µs each way (a network between two hosts of one zone). Its
// header names the host's regime: Redis µs per acquire script (INFO
// commandstats) and the loopback round trip.
//
//	# regime redis_us_per_acquire_evalsha=<x> loopback_rtt_us_p50=<x> ...
//	bench: <scenario> holdfast=<ops/s> ideal=<ops/s> redsync=<ops/s> redislock=<ops/s> ideal_floor=<ops/s> ratio_vs_ideal=<x.xx> ratio_vs_ideal_floor=<x.xx> allocs=<n>
//	bench: loaded_<scenario> ...
//	bench: latency250_<scenario> ...
//	bench: handoff p50_ms=<x> p99_ms=<x>
//	bench: roundtrips acquire_release=<n> failed_try=<n>
//
// Usage (Redis at REDIS_URL, default redis://127.0.0.1:6379/0):
//
//	go run ./cmd/leasebench [-rounds 120] [-ops 300] [-busy 2] [-latency 125us] [-latency-rounds 10] [-v] [-cpuprofile f] [-memprofile f]
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/bench"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

type config struct {
	url          string
	rounds       int
	ops          int           // operations per contender per round
	roundMax     time.Duration // bound on one contender's round
	trials       int           // hand-off trials
	ttl          time.Duration
	busy         int // busy loops beside the loaded scenarios; 0: none
	loadedRounds int // rounds of each loaded scenario
	// latency is the one-way delay of the latency regime's proxy (0:
	// none), latencyRounds its rounds per scenario.
	latency       time.Duration
	latencyRounds int
	verbose       bool
	cpuprofile    string
	memprofile    string
	only          string // run the scenarios whose name contains it only ("": all)
}

func main() {
	cfg := config{url: cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379/0")}
	flag.StringVar(&cfg.url, "redis", cfg.url, "Redis URL (default $REDIS_URL)")
	flag.IntVar(&cfg.rounds, "rounds", 120, "interleaved rounds per scenario (a multiple of 120 runs every order of the five equally often)")
	flag.IntVar(&cfg.ops, "ops", 300, "operations per contender per round (twice as many at 16 goroutines)")
	flag.DurationVar(&cfg.roundMax, "round-max", 2*time.Second, "upper bound on one contender's round")
	flag.IntVar(&cfg.trials, "trials", 200, "hand-off trials")
	flag.DurationVar(&cfg.ttl, "ttl", 10*time.Second, "lease TTL")
	flag.IntVar(&cfg.loadedRounds, "loaded-rounds", 60, "interleaved rounds per loaded_ scenario")
	flag.IntVar(&cfg.busy, "busy", 2, "CPU-bound busy loops (processes) run beside the loaded_ scenarios; 0 skips them")
	flag.DurationVar(&cfg.latency, "latency", 125*time.Microsecond, "one-way delay of the latency regime: every contender through one loopback proxy that adds it each way (latency<RTT µs>_ lines); 0 skips the regime")
	flag.IntVar(&cfg.latencyRounds, "latency-rounds", 10, "interleaved rounds per latency scenario")
	flag.BoolVar(&cfg.verbose, "v", false, "print every round to stderr")
	flag.StringVar(&cfg.only, "only", "", "run only the scenarios whose name contains this (e.g. _16); the hand-off and round-trip lines are skipped")
	flag.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.StringVar(&cfg.memprofile, "memprofile", "", "write an allocation profile at the end to this file")
	flag.Parse()
	if err := run(cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "leasebench:", err)
		os.Exit(1)
	}
}

func run(cfg config, stdout, stderr io.Writer) (err error) {
	if cfg.rounds < 1 || cfg.loadedRounds < 1 || cfg.latencyRounds < 1 || cfg.ops < 1 || cfg.trials < 1 || cfg.busy < 0 || cfg.latency < 0 {
		return errors.New("-rounds, -loaded-rounds, -latency-rounds, -ops and -trials must be positive, -busy and -latency not negative")
	}
	opts, err := redis.ParseURL(cfg.url)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	// Room for 64 goroutines plus the keep-alive, on any GOMAXPROCS, for
	// every contender alike.
	opts.PoolSize = max(opts.PoolSize, 80)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", cfg.url, err)
	}

	if cfg.cpuprofile != "" {
		f, err := os.Create(cfg.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	// One prefix per run, so that runs side by side do not meet.
	var id [4]byte
	_, _ = rand.Read(id[:])
	prefix := "holdfast-bench:" + hex.EncodeToString(id[:]) + ":"
	defer func() {
		n, derr := bench.DeleteKeys(context.WithoutCancel(ctx), rdb, prefix)
		if cfg.verbose {
			fmt.Fprintf(stderr, "# deleted %d keys under %s\n", n, prefix)
		}
		err = errors.Join(err, derr)
	}()

	contenders, err := bench.New(rdb, prefix, cfg.ttl)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# leasebench %s GOMAXPROCS=%d redis=%s rounds=%d loaded_rounds=%d ops=%d ttl=%v busy=%d\n",
		runtime.Version(), runtime.GOMAXPROCS(0), opts.Addr, cfg.rounds, cfg.loadedRounds, cfg.ops, cfg.ttl, cfg.busy)
	reg, err := hostRegime(ctx, rdb, bench.KeyPrefix(prefix, "regime"))
	if err != nil {
		return fmt.Errorf("regime: %w", err)
	}
	fmt.Fprintf(stdout, "# regime redis_us_per_acquire_evalsha=%.2f loopback_rtt_us_p50=%.1f (Redis CPU per acquire script from INFO commandstats over %d acquires; PING round trip, %d pings)\n",
		reg.evalshaUS, reg.rttUS, regimeAcquires, regimePings)
	start := time.Now()

	r := &runner{cfg: cfg, contenders: contenders, stderr: stderr}
	if err := r.scenarios(ctx, stdout, "", cfg.rounds); err != nil {
		return err
	}
	if cfg.busy > 0 {
		stop, err := busyLoops(ctx, cfg.busy)
		if err != nil {
			return fmt.Errorf("busy loops: %w", err)
		}
		err = r.scenarios(ctx, stdout, "loaded_", cfg.loadedRounds)
		stop()
		if err != nil {
			return err
		}
	}

	if cfg.latency > 0 {
		if err := latencyRegime(ctx, stdout, cfg, opts, prefix, stderr); err != nil {
			return fmt.Errorf("latency regime: %w", err)
		}
	}

	if cfg.only != "" {
		return nil
	}
	hf := contenders[0].(*bench.Holdfast)
	p50, p99, err := handoff(ctx, rdb, opts, bench.KeyPrefix(prefix, "handoff"), cfg, stderr)
	if err != nil {
		return fmt.Errorf("handoff: %w", err)
	}
	fmt.Fprintf(stdout, "bench: handoff p50_ms=%.2f p99_ms=%.2f\n", ms(p50), ms(p99))

	ar, ft, err := roundTrips(ctx, rdb, opts, hf, bench.KeyPrefix(prefix, "holdfast"), cfg.ttl)
	if err != nil {
		return fmt.Errorf("roundtrips: %w", err)
	}
	fmt.Fprintf(stdout, "bench: roundtrips acquire_release=%s failed_try=%s\n", num(ar), num(ft))
	fmt.Fprintf(stdout, "# took %.1fs\n", time.Since(start).Seconds())

	if cfg.memprofile != "" {
		f, err := os.Create(cfg.memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}
	return nil
}

// ---- scenarios -----------------------------------------------------------

type scenario struct {
	name       string
	idleOnly   bool // not run again beside the busy loops
	goroutines int
	shared     bool // all goroutines use one key
	held       bool // the key is acquired before the round and released after
	opsFactor  int  // ops per round = cfg.ops * opsFactor
	op         func(context.Context, bench.Worker) (acquired bool, err error)
	allocsLine bool // also print the allocs line (every contender's allocations and bytes per op)
	halfRounds bool // half the run's rounds: the longest rounds, far from a target's edge (keeps make bench under 8 min)
}

var scenarios = []scenario{
	{name: "uncontended_1", goroutines: 1, op: acquireRelease, opsFactor: 1, allocsLine: true},
	{name: "uncontended_16", goroutines: 16, op: acquireRelease, opsFactor: 2},
	{name: "contended_16", goroutines: 16, shared: true, op: tryOnce, opsFactor: 2},
	{name: "uncontended_64", goroutines: 64, op: acquireRelease, opsFactor: 4, halfRounds: true},
	{name: "contended_64", goroutines: 64, shared: true, op: tryOnce, opsFactor: 4, halfRounds: true},
	{name: "renew", goroutines: 1, held: true, op: renew, opsFactor: 1, idleOnly: true},
}

// scenarios runs every scenario (but the idle-only ones when label is not
// empty) for rounds rounds and prints its line, its name prefixed with
// label.
func (r *runner) scenarios(ctx context.Context, stdout io.Writer, label string, rounds int) error {
	for _, sc := range scenarios {
		if label != "" && sc.idleOnly || !strings.Contains(sc.name, r.cfg.only) {
			continue
		}
		sc.name = label + sc.name
		n := rounds
		if sc.halfRounds {
			n = max(rounds/2, 1)
		}
		res, err := r.scenario(ctx, sc, n)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		fmt.Fprintln(stdout, res.line(sc.name, false))
		if sc.allocsLine {
			fmt.Fprintln(stdout, res.line(label+"allocs", true))
		}
	}
	return nil
}

// busyLoops starts n processes that each keep one CPU busy (a shell's
// empty loop), as scripts/cpuhog.sh does, for at most ten minutes. The
// returned stop kills them and waits for them.
func busyLoops(ctx context.Context, n int) (stop func(), err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	var cmds []*exec.Cmd
	stop = func() {
		cancel()
		for _, c := range cmds {
			_ = c.Wait() // killed by the context
		}
	}
	for range n {
		c := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			stop()
			return nil, err
		}
		cmds = append(cmds, c)
	}
	return stop, nil
}

var errHeld = errors.New("lock unexpectedly held by another owner")

// acquireRelease takes a free lock and frees it: 2 round trips at best.
func acquireRelease(ctx context.Context, w bench.Worker) (bool, error) {
	ok, err := w.Acquire(ctx)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, errHeld
	}
	return true, w.Release(ctx)
}

// tryOnce tries a contended lock once and frees it when it got it. A
// failed try is an operation too.
func tryOnce(ctx context.Context, w bench.Worker) (bool, error) {
	ok, err := w.Acquire(ctx)
	if err != nil || !ok {
		return false, err
	}
	return true, w.Release(ctx)
}

func renew(ctx context.Context, w bench.Worker) (bool, error) {
	return true, w.Renew(ctx)
}

// ---- rounds --------------------------------------------------------------

type runner struct {
	cfg        config
	contenders []bench.Contender
	stderr     io.Writer
}

// sample is one contender's round.
type sample struct {
	ops, acquired int
	took, cpu     time.Duration // wall and CPU time of the round
	mallocs       uint64
	bytes         uint64
}

func (s sample) opsPerSec() float64   { return float64(s.ops) / s.took.Seconds() }
func (s sample) allocsPerOp() float64 { return float64(s.mallocs) / float64(s.ops) }
func (s sample) bytesPerOp() float64  { return float64(s.bytes) / float64(s.ops) }
func (s sample) successRate() float64 { return float64(s.acquired) / float64(s.ops) }
func (s sample) cpuPerOp() float64    { return float64(s.cpu.Microseconds()) / float64(s.ops) }
func (s sample) String() string {
	return fmt.Sprintf("%8.0f ops/s %6.1f allocs/op %6.0f B/op %5.1f cpu_us/op acquired %.2f (%d ops in %v)",
		s.opsPerSec(), s.allocsPerOp(), s.bytesPerOp(), s.cpuPerOp(), s.successRate(), s.ops, s.took.Round(time.Millisecond))
}

type result struct {
	opsPerSec, allocs, bytes []float64 // per contender: trimmed ops/s (trimmedOpsPerSec), median allocs and bytes per op
}

// scenario runs one warm-up round and rounds measured rounds of sc for
// every contender, each round in the next of the contenders' orders
// (orders), and returns the figures of each contender. A one-goroutine
// scenario runs call by call instead (scenarioInterleaved).
func (r *runner) scenario(ctx context.Context, sc scenario, rounds int) (result, error) {
	if sc.goroutines == 1 {
		return r.scenarioInterleaved(ctx, sc, rounds)
	}
	n := len(r.contenders)
	samples := make([][]sample, n)
	ops := r.cfg.ops * sc.opsFactor
	perms := orders(n)
	for round := -1; round < rounds; round++ {
		for i := range n {
			c := perms[max(round, 0)%len(perms)][i]
			warm := round < 0
			n := ops
			if warm { // connections up, scripts loaded
				n = min(ops/10, 200)
			}
			s, err := r.round(ctx, r.contenders[c], sc, n)
			if err != nil {
				return result{}, fmt.Errorf("%s: %w", r.contenders[c].Name(), err)
			}
			if r.cfg.verbose {
				tag := fmt.Sprintf("round %d", round+1)
				if warm {
					tag = "warm-up"
				}
				fmt.Fprintf(r.stderr, "# %-14s %-8s %-9s %v\n", sc.name, tag, r.contenders[c].Name(), s)
			}
			if !warm {
				samples[c] = append(samples[c], s)
			}
		}
	}
	res := result{opsPerSec: make([]float64, n), allocs: make([]float64, n), bytes: make([]float64, n)}
	for c, ss := range samples {
		res.opsPerSec[c] = trimmedOpsPerSec(ss)
		res.allocs[c] = median(ss, sample.allocsPerOp)
		res.bytes[c] = median(ss, sample.bytesPerOp)
	}
	if r.cfg.verbose {
		r.printPaired(sc.name, samples, samples)
	}
	return res, nil
}

// scenarioInterleaved runs a one-goroutine scenario with the contenders
// interleaved call by call: in each round every contender runs one
// operation (an acquire+release, or a renew) in turn, in the next of the
// contenders' orders at every turn, and each operation is timed on its
// own. A contender's ops/s in a round is its operations over the time they
// took. Rounds of one contender after another measured the same build from
// 0.89 to 1.20 of ideal_floor on a host whose round trip changes speed for
// seconds at a time (a small VM's: about x or 2x); calls side by side meet
// the same speed. A round ends early once it took cfg.roundMax per
// contender, after a whole turn, so that every contender made as many
// calls. The heap is collected before each round, untimed; a collection
// that starts within a round falls on the calls then in flight.
//
// The allocations of a call cannot be told apart from another contender's
// in an interleaved round, so they (and -v's CPU per op) come from up to
// allocRounds rounds of each contender on its own after the timed ones
// (allocations do not depend on the host's speed).
func (r *runner) scenarioInterleaved(ctx context.Context, sc scenario, rounds int) (res result, err error) {
	n := len(r.contenders)
	ops := r.cfg.ops * sc.opsFactor
	workers := make([]bench.Worker, 0, n)
	if sc.held {
		defer func() {
			for c, w := range workers {
				if rerr := w.Release(ctx); rerr != nil {
					err = errors.Join(err, fmt.Errorf("%s: teardown: %w", r.contenders[c].Name(), rerr))
				}
			}
		}()
	}
	for _, con := range r.contenders {
		w := con.Worker(sc.name)
		if sc.held {
			ok, err := w.Acquire(ctx)
			if err == nil && !ok {
				err = errHeld
			}
			if err != nil {
				return result{}, fmt.Errorf("%s: setup: %w", con.Name(), err)
			}
		}
		workers = append(workers, w)
	}
	samples := make([][]sample, n)
	perms := orders(n)
	turn := 0
	for round := -1; round < rounds; round++ {
		warm := round < 0
		k := ops
		if warm { // connections up, scripts loaded
			k = min(ops/10, 200)
		}
		took := make([]time.Duration, n)
		acquired := make([]int, n)
		runtime.GC()
		start := time.Now()
		deadline := start.Add(time.Duration(n) * r.cfg.roundMax)
		done := 0
		for done < k {
			for _, c := range perms[turn%len(perms)] {
				t0 := time.Now()
				ok, err := sc.op(ctx, workers[c])
				took[c] += time.Since(t0)
				if err != nil {
					return result{}, fmt.Errorf("%s: %w", r.contenders[c].Name(), err)
				}
				if ok {
					acquired[c]++
				}
			}
			turn++
			done++
			if time.Now().After(deadline) {
				break
			}
		}
		if warm {
			continue
		}
		for c := range n {
			samples[c] = append(samples[c], sample{ops: done, acquired: acquired[c], took: took[c]})
		}
		if r.cfg.verbose {
			fmt.Fprintf(r.stderr, "# %-14s round %-3d %d calls each, interleaved, in %v; wall µs per op:", sc.name, round+1, done, time.Since(start).Round(time.Millisecond))
			for c, d := range took {
				fmt.Fprintf(r.stderr, " %s=%.1f", r.contenders[c].Name(), d.Seconds()*1e6/float64(done))
			}
			fmt.Fprintln(r.stderr)
		}
	}
	res = result{opsPerSec: make([]float64, n), allocs: make([]float64, n), bytes: make([]float64, n)}
	for c, ss := range samples {
		res.opsPerSec[c] = trimmedOpsPerSec(ss)
	}
	// The rounds of each contender on its own, stepping through the
	// orders so that each contender goes first in some.
	solo := make([][]sample, n)
	nsolo := min(rounds, allocRounds)
	for round := range nsolo {
		for _, c := range perms[round*len(perms)/nsolo] {
			s, err := r.round(ctx, r.contenders[c], sc, ops)
			if err != nil {
				return result{}, fmt.Errorf("%s: %w", r.contenders[c].Name(), err)
			}
			if r.cfg.verbose {
				fmt.Fprintf(r.stderr, "# %-14s solo %-4d %-9s %v\n", sc.name, round+1, r.contenders[c].Name(), s)
			}
			solo[c] = append(solo[c], s)
		}
	}
	for c, ss := range solo {
		res.allocs[c] = median(ss, sample.allocsPerOp)
		res.bytes[c] = median(ss, sample.bytesPerOp)
	}
	if r.cfg.verbose {
		r.printPaired(sc.name, samples, solo)
	}
	return res, nil
}

// printPaired prints, to stderr, the median over rounds of holdfast's
// ops/s over the ideal's in the same round (less sensitive to other
// processes than the ratio of the figures), and each contender's median
// CPU time per op over the rounds of cpu.
func (r *runner) printPaired(name string, rounds, cpu [][]sample) {
	paired := make([]float64, len(rounds[0]))
	for i := range paired {
		paired[i] = rounds[0][i].opsPerSec() / rounds[1][i].opsPerSec()
	}
	slices.Sort(paired)
	fmt.Fprintf(r.stderr, "# %-14s median paired ratio_vs_ideal=%.2f cpu_us/op", name, paired[len(paired)/2])
	for c, ss := range cpu {
		fmt.Fprintf(r.stderr, " %s=%.1f", r.contenders[c].Name(), median(ss, sample.cpuPerOp))
	}
	fmt.Fprintln(r.stderr)
}

// allocRounds is how many rounds of each contender on its own (at most) a
// one-goroutine scenario runs for its allocation figures.
const allocRounds = 5

// orders returns every order of n contenders (24 for 4), in an order where
// each contender runs in each place, and right after each other one,
// equally often over a whole cycle: a contender's round is not always
// preceded by the same one, whose leftovers (garbage, Redis keys, idle
// threads) it would otherwise always meet.
func orders(n int) [][]int {
	var out [][]int
	var permute func(p []int, k int)
	permute = func(p []int, k int) {
		if k == len(p) {
			out = append(out, slices.Clone(p))
			return
		}
		for i := k; i < len(p); i++ {
			p[k], p[i] = p[i], p[k]
			permute(p, k+1)
			p[k], p[i] = p[i], p[k]
		}
	}
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	permute(p, 0)
	return out
}

// round runs ops operations of sc on c, spread over sc.goroutines, and stops
// early at cfg.roundMax.
func (r *runner) round(ctx context.Context, c bench.Contender, sc scenario, ops int) (sample, error) {
	workers := make([]bench.Worker, sc.goroutines)
	for g := range workers {
		key := sc.name
		if !sc.shared {
			key = fmt.Sprintf("%s-%d", sc.name, g)
		}
		workers[g] = c.Worker(key)
		if sc.held {
			ok, err := workers[g].Acquire(ctx)
			if err == nil && !ok {
				err = errHeld
			}
			if err != nil {
				return sample{}, fmt.Errorf("setup: %w", err)
			}
		}
	}

	var (
		next, completed, acquired atomic.Int64
		firstErr                  error
		errOnce                   sync.Once
		wg                        sync.WaitGroup
		m0, m1                    runtime.MemStats
	)
	runtime.GC()
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	start := time.Now()
	deadline := start.Add(r.cfg.roundMax)
	for _, w := range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(ops) {
				ok, err := sc.op(ctx, w)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(ops)) // stop everyone
					return
				}
				completed.Add(1)
				if ok {
					acquired.Add(1)
				}
				if time.Now().After(deadline) {
					next.Store(int64(ops))
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&m1)
	if firstErr != nil {
		return sample{}, firstErr
	}
	if sc.held {
		for _, w := range workers {
			if err := w.Release(ctx); err != nil {
				return sample{}, fmt.Errorf("teardown: %w", err)
			}
		}
	}
	return sample{
		ops: max(int(completed.Load()), 1), acquired: int(acquired.Load()), took: took, cpu: cpu,
		mallocs: m1.Mallocs - m0.Mallocs, bytes: m1.TotalAlloc - m0.TotalAlloc,
	}, nil
}

// line is one scenario's output line; allAllocs adds every contender's
// allocations and bytes per op.
func (res result) line(name string, allAllocs bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bench: %s", name)
	for i, name := range bench.Names {
		fmt.Fprintf(&b, " %s=%.0f", name, res.opsPerSec[i])
	}
	fmt.Fprintf(&b, " ratio_vs_ideal=%.2f ratio_vs_ideal_floor=%.2f allocs=%s",
		res.opsPerSec[0]/res.opsPerSec[1], res.opsPerSec[0]/res.opsPerSec[4], num(res.allocs[0]))
	if allAllocs {
		for i, name := range bench.Names[1:] {
			fmt.Fprintf(&b, " allocs_%s=%s", name, num(res.allocs[i+1]))
		}
		for i, name := range bench.Names {
			fmt.Fprintf(&b, " bytes_%s=%.0f", name, res.bytes[i])
		}
	}
	return b.String()
}

// ---- hand-off ------------------------------------------------------------

// handoff measures, over cfg.trials trials, the time from the holder's
// Release call to the return of a waiter's blocked Acquire. Holder and
// waiter are separate lease.Clients on separate connection pools, as two
// replicas would be.
func handoff(ctx context.Context, rdb *redis.Client, opts *redis.Options, prefix string, cfg config, stderr io.Writer) (p50, p99 time.Duration, err error) {
	wrdb := redis.NewClient(opts)
	defer wrdb.Close()
	rb, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix})
	if err != nil {
		return 0, 0, err
	}
	holder, err := lease.NewWithBackend(rb, lease.Options{})
	if err != nil {
		return 0, 0, err
	}
	waiter, err := lease.New(wrdb, lease.Options{Prefix: prefix})
	if err != nil {
		return 0, 0, err
	}
	const name = "handoff"
	keys, err := rb.Keys(name)
	if err != nil {
		return 0, 0, err
	}
	// The channel a release publishes on once a blocked Acquire flagged
	// the lease (lease/redislease/scripts/release.lua): watching its subscriber count
	// tells when the waiter listens; its next try flags the lease.
	channel := keys.Released

	lat := make([]time.Duration, 0, cfg.trials)
	for range cfg.trials {
		held, err := holder.TryAcquire(ctx, name, cfg.ttl)
		if err != nil {
			return 0, 0, fmt.Errorf("holder: %w", err)
		}
		type got struct {
			l   *lease.Lease
			at  time.Time
			err error
		}
		ch := make(chan got, 1)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		go func() {
			l, err := waiter.Acquire(wctx, name, cfg.ttl)
			ch <- got{l, time.Now(), err}
		}()
		// Blocked: subscribed (then one more try, one round trip).
		for wait := time.Now(); time.Since(wait) < 200*time.Millisecond; {
			subs, err := rdb.PubSubNumSub(ctx, channel).Result()
			if err != nil {
				cancel()
				return 0, 0, err
			}
			if subs[channel] > 0 {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		time.Sleep(2 * time.Millisecond)
		t0 := time.Now()
		if err := held.Release(ctx); err != nil {
			cancel()
			return 0, 0, fmt.Errorf("holder release: %w", err)
		}
		g := <-ch
		cancel()
		if g.err != nil {
			return 0, 0, fmt.Errorf("waiter: %w", g.err)
		}
		lat = append(lat, g.at.Sub(t0))
		if err := g.l.Release(ctx); err != nil {
			return 0, 0, fmt.Errorf("waiter release: %w", err)
		}
	}
	slices.Sort(lat)
	if cfg.verbose {
		fmt.Fprintf(stderr, "# handoff min=%v p50=%v p90=%v p99=%v max=%v\n",
			lat[0], pct(lat, 50), pct(lat, 90), pct(lat, 99), lat[len(lat)-1])
	}
	return pct(lat, 50), pct(lat, 99), nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ---- round trips ---------------------------------------------------------

// countHook counts round trips: a command, or a pipeline, is one.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// roundTrips counts holdfast's round trips per acquire+release and per
// failed try, on a client of its own with a counting hook. The lease held
// during the failed tries is taken through hf, on the shared client.
func roundTrips(ctx context.Context, rdb *redis.Client, opts *redis.Options, hf *bench.Holdfast, prefix string, ttl time.Duration) (acquireRelease, failedTry float64, err error) {
	const n = 200
	crdb := redis.NewClient(opts)
	defer crdb.Close()
	hook := &countHook{}
	crdb.AddHook(hook)
	c, err := lease.New(crdb, lease.Options{Prefix: prefix})
	if err != nil {
		return 0, 0, err
	}
	measure := func(op func() error) (float64, error) {
		for range 10 { // warm-up: connection up, scripts loaded
			if err := op(); err != nil {
				return 0, err
			}
		}
		before := hook.n.Load()
		for range n {
			if err := op(); err != nil {
				return 0, err
			}
		}
		return float64(hook.n.Load()-before) / n, nil
	}
	acquireRelease, err = measure(func() error {
		l, err := c.TryAcquire(ctx, "roundtrips", ttl)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	})
	if err != nil {
		return 0, 0, err
	}
	held, err := hf.Client().TryAcquire(ctx, "roundtrips-held", ttl)
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, held.Release(ctx)) }()
	failedTry, err = measure(func() error {
		l, err := c.TryAcquire(ctx, "roundtrips-held", ttl)
		if err == nil {
			_ = l.Release(ctx)
			return errors.New("acquired a held lease")
		}
		if !errors.Is(err, lease.ErrNotAcquired) {
			return err
		}
		return nil
	})
	return acquireRelease, failedTry, err
}

// ---- helpers -------------------------------------------------------------

// trimmedOpsPerSec returns ops/s over the rounds, leaving out the tenth
// slowest and the tenth fastest (by time per op): 1 / the mean time per op
// of the others. On a machine whose speed switches between two modes (a
// small VM: rounds run at either about x or 2x), a median jumps from one
// mode to the other as the share of fast rounds crosses one half; the mean
// follows the share smoothly, and the trimming keeps a stalled round from
// weighing on it.
func trimmedOpsPerSec(ss []sample) float64 {
	per := make([]float64, len(ss))
	for i, s := range ss {
		per[i] = s.took.Seconds() / float64(s.ops)
	}
	slices.Sort(per)
	k := len(per) / 10
	per = per[k : len(per)-k]
	sum := 0.0
	for _, p := range per {
		sum += p
	}
	return float64(len(per)) / sum
}

func median(ss []sample, f func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// num prints a per-operation count: whole numbers without decimals.
func num(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

// ---- regimes -------------------------------------------------------------

// regimeAcquires and regimePings are the calibration's sizes.
const (
	regimeAcquires = 500
	regimePings    = 1000
)

// regime is what tells two hosts' figures apart: the Redis CPU one acquire
// script costs there, and the loopback round trip.
type regime struct {
	evalshaUS, rttUS float64
}

// hostRegime measures the host's regime: regimeAcquires acquisitions of
// distinct leases through redislease (no keep-alive, no release), with the
// server's EVALSHA calls and µs read from INFO commandstats before and
// after (other clients of the same server add to them), and the p50 of
// regimePings PINGs.
func hostRegime(ctx context.Context, rdb *redis.Client, prefix string) (regime, error) {
	b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix})
	if err != nil {
		return regime{}, err
	}
	if _, err := b.Acquire(ctx, "warm", "regime", time.Minute); err != nil { // the script loaded
		return regime{}, err
	}
	calls0, us0, err := evalshaStats(ctx, rdb)
	if err != nil {
		return regime{}, err
	}
	for i := range regimeAcquires {
		if _, err := b.Acquire(ctx, "r"+strconv.Itoa(i), "regime", time.Minute); err != nil {
			return regime{}, err
		}
	}
	calls1, us1, err := evalshaStats(ctx, rdb)
	if err != nil {
		return regime{}, err
	}
	var r regime
	if calls1 > calls0 {
		r.evalshaUS = float64(us1-us0) / float64(calls1-calls0)
	}
	rtts := make([]time.Duration, regimePings)
	for i := range rtts {
		t := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return regime{}, err
		}
		rtts[i] = time.Since(t)
	}
	slices.Sort(rtts)
	r.rttUS = float64(rtts[len(rtts)/2].Nanoseconds()) / 1e3
	return r, nil
}

// evalshaStats returns the server's EVALSHA calls and µs so far
// (cmdstat_evalsha in INFO commandstats).
func evalshaStats(ctx context.Context, rdb *redis.Client) (calls, usec int64, err error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
	}
	return calls, usec, nil
}

// latencyRegime runs the scenarios (but the idle-only ones) with every
// contender's client going through one loopback proxy that adds
// cfg.latency each way (bench.LatencyProxy): Redis across a network, not
// on loopback. Lines are prefixed "latency<round trip in µs>_".
func latencyRegime(ctx context.Context, stdout io.Writer, cfg config, opts *redis.Options, prefix string, stderr io.Writer) error {
	proxy, err := bench.NewLatencyProxy(opts.Addr, cfg.latency)
	if err != nil {
		return err
	}
	defer proxy.Close()
	popts := *opts
	popts.Addr = proxy.Addr()
	rdb := redis.NewClient(&popts)
	defer rdb.Close()
	rtts := make([]time.Duration, 200)
	for i := range rtts {
		t := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return err
		}
		rtts[i] = time.Since(t)
	}
	slices.Sort(rtts)
	label := fmt.Sprintf("latency%d_", (2 * cfg.latency).Microseconds())
	fmt.Fprintf(stdout, "# regime %s one_way_us=%d proxied_rtt_us_p50=%.1f\n", label, cfg.latency.Microseconds(),
		float64(rtts[len(rtts)/2].Nanoseconds())/1e3)
	contenders, err := bench.New(rdb, bench.KeyPrefix(prefix, "latency"), cfg.ttl)
	if err != nil {
		return err
	}
	r := &runner{cfg: cfg, contenders: contenders, stderr: stderr}
	return r.scenarios(ctx, stdout, label, cfg.latencyRounds)
}
