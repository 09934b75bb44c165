// Command schedbench measures the scheduler at scale: slots (jobs x
// partitions) due in the same second across 3 scheduler instances, on a
// redis-server it starts (so that INFO cpu counts its commands only; set
// REDIS_URL to use another server), then the same on a 3-master Redis
// Cluster it starts, then a peer, go-co-op/gocron v2 with a bsm/redislock
// Locker, on the same jobs. It prints:
//
//	bench: scheduler_floor layout=v2 units=10000 redis_us_per_slot=<x> second_us_per_slot=<x> (...)
//	bench: scheduler slots=10000 replicas=3 claim_all_ms=<x> finish_all_ms=<x> lag_p50_ms=<x> lag_p99_ms=<x> runs=<n> duplicates=<n> redis_us_per_slot=<x> ratio_vs_floor=<x>
//	bench: scheduler_peer gocron slots=10000 replicas=3 skew_ms=0,+300,-300 lag_p50_ms=<x> lag_p99_ms=<x> runs=<n> duplicates=<n>
//	bench: scheduler roundtrips acquire_per_slot_per_replica=<x> total_per_slot=<x>
//	bench: scheduler cpu redis_ms=<x> redis_us_per_slot=<x> schedulers_ms=<x> allocs_per_slot=<x>
//	bench: scheduler memory bytes_per_registered_job=<x>
//	bench: scheduler start units=10000 replicas=3 recovery_ms=<x> redis_us_per_unit_replica=<x>
//	bench: scheduler_second slots=10000 ... redis_us_per_slot=<x>
//	bench: scheduler slots=1000 ... redis_us_per_slot=<x>
//	bench: scheduler_cluster masters=3 slots=10000 ... redis_us_per_slot=<x>
//
// claim_all_ms is the time from the slot until its last run started,
// finish_all_ms until its last run's outcome was recorded (counted with an
// Observer's RunCompleted); the Redis and schedulers' CPU are measured
// from 200 ms before the slot until then.
//
// scheduler_floor is the ledger layout's bare commands (bench.Floor, v2)
// for the 10,000-slot case's two slots, each measured on the case's
// server just before and just after its slot; ratio_vs_floor on the
// scheduler and scheduler_second lines is over their mean.
//
// scheduler_second is the same units' next slot, 5 s after the first
// (the jobs fire every 5 s): the slot of a recurring job whose records
// exist, in a keyspace that holds the first slot's.
//
// Run it from bench/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/bench"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

func main() {
	jobs := flag.Int("jobs", 100, "jobs")
	parts := flag.Int("partitions", 100, "partitions per job")
	replicas := flag.Int("replicas", 3, "scheduler instances")
	claims := flag.Int("claims", 256, "MaxConcurrentClaims per instance")
	only := flag.String("only", "", "run one case only: scheduler, peer, small, cluster")
	flag.BoolVar(&commandStats, "commandstats", false, "print the server's INFO commandstats and stats of the 10,000-slot case's slot (reset 200 ms before it)")
	flag.StringVar(&memProfile, "memprofile", "", "write an allocation profile (every allocation sampled) of the 10,000-slot case's slot, from 200 ms before it until every run was recorded, to this file")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the 10,000-slot case's slot (from its start until every run was recorded) to this file")
	flag.Parse()
	if err := run(*jobs, *parts, *replicas, *claims, *only); err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
}

var (
	cpuProfile   string
	memProfile   string
	commandStats bool
)

// commandStats resets (reset true) or prints the servers' INFO
// commandstats and stats.
func (t target) commandStats(ctx context.Context, reset bool) {
	for _, o := range t.servers {
		rdb := redis.NewClient(o)
		if reset {
			rdb.ConfigResetStat(ctx)
		} else {
			info, _ := rdb.Info(ctx, "commandstats", "stats").Result()
			fmt.Printf("commandstats %s:\n%s", o.Addr, info)
		}
		_ = rdb.Close()
	}
}

// target is the Redis deployment a case runs on.
type target struct {
	client  func(pool int) redis.UniversalClient
	servers []*redis.Options // every master, for INFO cpu and SCAN
}

// redisCPU returns the CPU time (user + system) the servers used so far,
// from INFO cpu; 0 when it cannot tell.
func (t target) redisCPU(ctx context.Context) time.Duration {
	var total time.Duration
	for _, o := range t.servers {
		rdb := redis.NewClient(o)
		used, err := bench.ServerCPU(ctx, rdb)
		_ = rdb.Close()
		if err != nil {
			return 0
		}
		total += used
	}
	return total
}

// quiet waits until the servers processed no command other than its own
// probes (INFO stats, one per server every 100 ms) for d, or returns an
// error at limit. busy is when it last saw another command (its first
// probe when none), to within a probe's 100 ms.
func (t target) quiet(ctx context.Context, d time.Duration, limit time.Time) (busy time.Time, err error) {
	var clients []*redis.Client
	for _, o := range t.servers {
		clients = append(clients, redis.NewClient(o))
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	processed := func() (int64, error) {
		var n int64
		for _, c := range clients {
			info, err := c.Info(ctx, "stats").Result()
			if err != nil {
				return 0, err
			}
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
					x, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						return 0, err
					}
					n += x
				}
			}
		}
		return n, nil
	}
	last, err := processed()
	if err != nil {
		return time.Time{}, err
	}
	since := time.Now()
	for time.Since(since) < d {
		if time.Now().After(limit) {
			return time.Time{}, fmt.Errorf("a server was still busy at %v", limit.Format(time.TimeOnly))
		}
		time.Sleep(100 * time.Millisecond)
		n, err := processed()
		if err != nil {
			return time.Time{}, err
		}
		if n-last > int64(len(clients)) { // more than the last probe
			since = time.Now()
		}
		last = n
	}
	return since, nil
}

// cleanup deletes the keys under prefix.
func (t target) cleanup(prefix string) {
	for _, o := range t.servers {
		rdb := redis.NewClient(o)
		deletePrefix(rdb, prefix)
		_ = rdb.Close()
	}
}

// deletePrefix deletes the keys of rdb's database under prefix.
func deletePrefix(rdb *redis.Client, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

// writeHeapProfile writes the allocation profile so far to path (compare
// two with go tool pprof -base).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// mallocs returns the heap allocations of this process so far
// (runtime.MemStats.Mallocs).
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// processCPU returns this process's CPU time (user + system) so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// counter counts commands by kind with a go-redis hook.
type counter struct{ acquire, total atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, n, a string) (net.Conn, error) { return next(ctx, n, a) }
}

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.total.Add(1) // one round trip
		for _, cmd := range cmds {
			if c.isAcquire(cmd) {
				c.acquire.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

func (c *counter) count(cmd redis.Cmder) {
	c.total.Add(1)
	if c.isAcquire(cmd) {
		c.acquire.Add(1)
	}
}

// isAcquire: the plain acquire script is the only one with two keys, a
// lease key and its fence counter (EVALSHA sha 2 <prefix>lease:{name}
// <prefix>lease:{name}:fence ...); release's second key is the waiting
// flag. The ledger's claim script, which takes a batch of leases, is not
// counted.
func (c *counter) isAcquire(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) <= 4 || fmt.Sprint(args[2]) != "2" {
		return false
	}
	lk, _ := args[3].(string)
	fk, _ := args[4].(string)
	return strings.HasSuffix(lk, "}") && strings.Contains(lk, "lease:") && fk == lk+":fence"
}

func run(nJobs, nParts, nReplicas, claims int, only string) error {
	single, stop, err := singleTarget()
	if err != nil {
		return err
	}
	defer stop()
	want := func(c string) bool { return only == "" || only == c }

	if want("scheduler") {
		res, err := runHoldfastAdaptive(single, nJobs, nParts, nReplicas, claims, cpuProfile, commandStats, true)
		if err != nil {
			return err
		}
		f1, f2 := meanFloor(res.floors), meanFloor(res.second.floors)
		fmt.Printf("bench: scheduler_floor layout=v2 units=%d redis_us_per_slot=%.1f second_us_per_slot=%.1f (claim %.1f + finish %.1f; second %.1f + %.1f; each slot's the mean of its floor measured on the same server just before and just after it: %s; %s)\n",
			nJobs*nParts, us(f1.Total()), us(f2.Total()), us(f1.Claim), us(f1.Finish), us(f2.Claim), us(f2.Finish),
			floorList(res.floors), floorList(res.second.floors))
		res.print("scheduler", nReplicas)
		fmt.Printf("bench: scheduler roundtrips acquire_per_slot_per_replica=%.2f total_per_slot=%.2f\n",
			float64(res.acquires)/float64(res.slots*nReplicas), float64(res.roundTrips)/float64(res.slots))
		fmt.Printf("bench: scheduler cpu redis_ms=%.0f redis_us_per_slot=%.1f schedulers_ms=%.0f allocs_per_slot=%.0f (from 200 ms before the slot until every run was recorded; allocs: the three schedulers' heap allocations)\n",
			ms(res.redisCPU), us(res.redisCPU)/float64(res.slots), ms(res.procCPU), float64(res.mallocs)/float64(res.slots))
		fmt.Printf("bench: scheduler memory bytes_per_registered_job=%.0f bytes_per_job_partition=%.0f (%d partitions)\n",
			res.perJob, res.perUnit, nParts)
		fmt.Printf("bench: scheduler start units=%d replicas=%d recovery_ms=%.0f redis_us_per_unit_replica=%.1f (the recovery claims at Start of units with nothing to recover)\n",
			res.slots, nReplicas, ms(res.recovery), us(res.recoveryCPU)/float64(res.slots*nReplicas))
		res.second.print("scheduler_second", nReplicas)
	}
	if want("peer") {
		if err := runPeer(single, nJobs*nParts, nReplicas); err != nil {
			return err
		}
	}
	if want("small") {
		res, err := runHoldfastAdaptive(single, max(nJobs/10, 1), nParts, nReplicas, claims, "", false, false)
		if err != nil {
			return err
		}
		res.print("scheduler", nReplicas)
	}
	if want("cluster") {
		cluster, stop, err := clusterTarget(3)
		if err != nil {
			return err
		}
		defer stop()
		res, err := runHoldfastAdaptive(cluster, nJobs, nParts, nReplicas, claims, "", false, false)
		if err != nil {
			return err
		}
		res.print("scheduler_cluster masters=3", nReplicas)
	}
	return nil
}

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }
func us(d time.Duration) float64 { return d.Seconds() * 1e6 }

// singleTarget is REDIS_URL's server, or one this command starts.
func singleTarget() (target, func(), error) {
	url := os.Getenv("REDIS_URL")
	stop := func() {}
	if url == "" {
		s, err := redisproc.Launch()
		if err != nil {
			return target{}, nil, fmt.Errorf("%w (install redis-server, or set REDIS_URL)", err)
		}
		url, stop = "redis://"+s.Addr()+"/0", s.Close
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		stop()
		return target{}, nil, err
	}
	return target{
		client: func(pool int) redis.UniversalClient {
			o := *opts
			o.PoolSize = pool
			return redis.NewClient(&o)
		},
		servers: []*redis.Options{opts},
	}, stop, nil
}

// clusterTarget is a Redis Cluster of masters this command starts.
func clusterTarget(masters int) (target, func(), error) {
	c, err := redisproc.LaunchCluster(masters)
	if err != nil {
		return target{}, nil, err
	}
	addrs := c.Addrs
	var servers []*redis.Options
	for _, addr := range addrs {
		servers = append(servers, &redis.Options{Addr: addr})
	}
	return target{
		client: func(pool int) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: pool})
		},
		servers: servers,
	}, c.Close, nil
}

// result is one run of holdfast's case.
type result struct {
	slots, runs, dups    int
	claimAll             time.Duration // from the slot until its last run started
	finishAll            time.Duration // from the slot until its last run was recorded (Observer.RunCompleted)
	p50, p99             float64
	redisCPU, procCPU    time.Duration
	mallocs              uint64 // heap allocations of the schedulers (this process) over the same window
	acquires, roundTrips int64
	perJob, perUnit      float64
	// recovery spans the replicas' Starts until the servers last
	// processed a command before the quiet spell; recoveryCPU is the
	// servers' CPU over Start and the spell.
	recovery, recoveryCPU time.Duration
	second                *result // the second slot, when measured
	// floors are the layout's bare commands' CPU per unit for this slot
	// (bench.Floor, v2) measured on the same server just before and just
	// after it (scheduler_floor); their mean is the floor of its
	// ratio_vs_floor. None: not measured.
	floors []bench.FloorSlot
}

func (r result) print(name string, replicas int) {
	ratio := ""
	if f := meanFloor(r.floors).Total(); f > 0 {
		ratio = fmt.Sprintf(" ratio_vs_floor=%.2f", us(r.redisCPU)/float64(r.slots)/us(f))
	}
	fmt.Printf("bench: %s slots=%d replicas=%d claim_all_ms=%.0f finish_all_ms=%.0f lag_p50_ms=%.1f lag_p99_ms=%.1f runs=%d duplicates=%d redis_us_per_slot=%.1f%s\n",
		name, r.slots, replicas, ms(r.claimAll), ms(r.finishAll), r.p50, r.p99, r.runs, r.dups, us(r.redisCPU)/float64(r.slots), ratio)
}

// floorPair measures the ledger layout's floor (bench.Floor, v2) beside a
// case's slots, on its server: before, just before each slot, and after,
// just after it (once the slot's runs were recorded and the server was
// quiet), each a Floor of its own, in the next database of the server
// (its own keyspace: the case's stays as it was).
type floorPair struct {
	rdb           *redis.Client
	prefix        string
	before, after *bench.Floor
	got           []bench.FloorSlot // measured since the last take
	took          time.Duration     // the last measure's time
}

func (t target) newFloorPair(prefix string, units int) (*floorPair, error) {
	o := *t.servers[0]
	o.DB = (o.DB + 1) % 16
	p := &floorPair{rdb: redis.NewClient(&o), prefix: prefix}
	var err error
	if p.before, err = bench.NewFloor(p.rdb, prefix+"before:", "v2", units); err != nil {
		_ = p.rdb.Close()
		return nil, err
	}
	if p.after, err = bench.NewFloor(p.rdb, prefix+"after:", "v2", units); err != nil {
		_ = p.rdb.Close()
		return nil, err
	}
	return p, nil
}

// measure runs f's next slot. With a slot instant, it must end 200 ms
// before it (where the case's measure starts): a floor that ends later
// is errNotQuiet, and the case runs again with the long lead.
func (p *floorPair) measure(ctx context.Context, f *bench.Floor, slot time.Time) error {
	t0 := time.Now()
	m, err := f.Slot(ctx)
	p.took = time.Since(t0)
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	if !slot.IsZero() && time.Now().After(slot.Add(-200*time.Millisecond)) {
		return fmt.Errorf("%w: the floor measured before the slot at %v ended at %v", errNotQuiet, slot.Format(time.TimeOnly), time.Now().Format(time.TimeOnly))
	}
	p.got = append(p.got, m)
	return nil
}

// take returns the floors measured since the last take.
func (p *floorPair) take() []bench.FloorSlot {
	got := p.got
	p.got = nil
	return got
}

// close deletes the floors' keys and closes the client.
func (p *floorPair) close() {
	deletePrefix(p.rdb, p.prefix)
	_ = p.rdb.Close()
}

// floorList is the floors' totals in µs, "29.9 and 26.9" (one alone when
// the second slot had no room for its floor before it).
func floorList(fs []bench.FloorSlot) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%.1f", us(f.Total())))
	}
	return strings.Join(parts, " and ")
}

// meanFloor is the mean of floor slots (claim and finish each).
func meanFloor(fs []bench.FloorSlot) bench.FloorSlot {
	var m bench.FloorSlot
	for _, f := range fs {
		m.Claim += f.Claim / time.Duration(len(fs))
		m.Finish += f.Finish / time.Duration(len(fs))
	}
	return m
}

// lead is how far ahead of Start the slot is: long enough for every
// instance's recovery at Start (a State read per job and partition, in
// batches, and a claim where there is something to recover: nothing
// here) to be over before it comes due, which runHoldfast waits for. A
// first try takes a short lead (7 s at 10,000 slots, 4.3 s at 1,000,
// where the recovery and the quiet spell after it took about 2 s on an
// idle 2-core host); a host too slow for it gets errNotQuiet and the
// case runs again with slow, about four times as long.
func lead(slots, replicas int, slow bool) time.Duration {
	d := 4*time.Second + time.Duration(slots*replicas)*100*time.Microsecond
	if slow {
		d = 4*time.Second + time.Duration(slots*replicas)*800*time.Microsecond
	}
	return d.Round(time.Second) // the slot is a whole second
}

// errNotQuiet: the recovery claims at Start were not over before the
// slot's lead ran out.
var errNotQuiet = errors.New("the recovery claims at Start were not over in time")

// runHoldfastAdaptive runs the case with the short lead, and again with
// the long one when the host was too slow for it.
func runHoldfastAdaptive(t target, nJobs, nParts, nReplicas, claims int, profile string, stats, second bool) (result, error) {
	res, err := runHoldfast(t, nJobs, nParts, nReplicas, claims, profile, stats, second, false)
	if errors.Is(err, errNotQuiet) {
		fmt.Fprintf(os.Stderr, "schedbench: %v; running the case again with a lead of %v\n", err, lead(nJobs*nParts, nReplicas, true))
		res, err = runHoldfast(t, nJobs, nParts, nReplicas, claims, profile, stats, second, true)
	}
	return res, err
}

// secondGap is how long after the first slot the second one comes, in
// the cases that measure a second slot.
const secondGap = 5 * time.Second

// runHoldfast runs a case: slots (nJobs x nParts) due in one second on
// nReplicas schedulers. With second, the jobs fire every secondGap and
// the same units' second slot is measured too (result.second): a slot
// of units whose records exist, as every slot of a recurring job after
// its first.
func runHoldfast(t target, nJobs, nParts, nReplicas, claims int, profile string, stats, second, slow bool) (result, error) {
	prefix := fmt.Sprintf("holdfast-schedbench:%d:", time.Now().UnixNano())
	defer t.cleanup(prefix)

	partitions := make([]string, nParts)
	for i := range partitions {
		partitions[i] = fmt.Sprintf("p%03d", i)
	}
	slots := nJobs * nParts
	start := time.Now().Truncate(time.Second).Add(lead(slots, nReplicas, slow))
	spec, end := "* * * * * *", start.Add(time.Second)
	if second {
		// Fires every secondGap (on multiples of it, as is start): the
		// slot at start and the one secondGap later.
		start = start.Truncate(secondGap).Add(secondGap)
		spec, end = fmt.Sprintf("*/%d * * * * *", int(secondGap/time.Second)), start.Add(secondGap+time.Second)
	}
	rec, rec2 := newRecorder(slots), newRecorder(slots)
	done := newCompletions(slots, 2*slots)
	fn := func(_ context.Context, r scheduler.Run) error {
		if r.At.Equal(start) {
			rec.add(r.IdempotencyKey, time.Since(r.At))
		} else {
			rec2.add(r.IdempotencyKey, time.Since(r.At))
		}
		return nil
	}

	// Memory per registered job: heap growth of one more instance.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	var scheds []*scheduler.Scheduler
	var counters []*counter
	for range nReplicas {
		rdb := t.client(claims + 16)
		defer rdb.Close()
		c := &counter{}
		rdb.AddHook(c)
		counters = append(counters, c)
		leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
		if err != nil {
			return result{}, err
		}
		ledger, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
		if err != nil {
			return result{}, err
		}
		s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ledger, MaxConcurrentClaims: claims, Observer: done})
		if err != nil {
			return result{}, err
		}
		for j := range nJobs {
			err := s.Register(scheduler.Job{
				Name: fmt.Sprintf("job%03d", j), Spec: spec, Partitions: partitions, LeaseTTL: 10 * time.Second,
				StartAt: start, EndAt: end, Run: fn,
			})
			if err != nil {
				return result{}, err
			}
		}
		scheds = append(scheds, s)
		if len(scheds) == 1 {
			runtime.GC()
			runtime.ReadMemStats(&after)
		}
	}
	res := result{
		perJob:  float64(after.HeapAlloc-before.HeapAlloc) / float64(nJobs),
		perUnit: float64(after.HeapAlloc-before.HeapAlloc) / float64(slots),
	}

	ctx := context.Background()
	started, startCPU := time.Now(), t.redisCPU(ctx)
	for _, s := range scheds {
		if err := s.Start(ctx); err != nil {
			return result{}, err
		}
	}
	// Count from just before the slot, once the recovery claims at Start
	// (which read every unit's State, and take the lease of a unit with
	// something to recover: none here) are over: they are not part of the
	// claim cost. A recovery claim that found the lease held claims again
	// a second later (scheduler's wake-up retry), so "over" is: the
	// servers processed no command but these probes for longer than that.
	busy, err := t.quiet(ctx, 1500*time.Millisecond, start.Add(-200*time.Millisecond))
	if err != nil {
		for _, s := range scheds {
			_ = s.Stop(ctx)
		}
		return result{}, fmt.Errorf("%w (%v after Start: %v)", errNotQuiet, lead(slots, nReplicas, slow), err)
	}
	res.recovery, res.recoveryCPU = busy.Sub(started), t.redisCPU(ctx)-startCPU
	var floors *floorPair
	if second && len(t.servers) == 1 {
		// The floor of each slot, measured on the same server just
		// before and just after it: the server's speed moves by a third
		// from one minute to the next on a shared host, so a floor
		// measured elsewhere or earlier would move the ratio as much.
		if floors, err = t.newFloorPair(prefix+"floor:", slots); err != nil {
			return result{}, err
		}
		defer floors.close()
		if err := floors.measure(ctx, floors.before, start); err != nil {
			return result{}, err
		}
	}
	<-time.After(time.Until(start.Add(-200 * time.Millisecond)))
	if stats {
		t.commandStats(ctx, true)
	}
	if memProfile != "" && second {
		// Every allocation from here on, counted apart from those before.
		runtime.MemProfileRate = 1
		runtime.GC()
		if err := writeHeapProfile(memProfile + ".before"); err != nil {
			return result{}, err
		}
	}
	redisCPU0, procCPU0, mallocs0 := t.redisCPU(ctx), processCPU(), mallocs()
	var baseAcquires, baseTotal int64
	for _, c := range counters {
		baseAcquires += c.acquire.Load()
		baseTotal += c.total.Load()
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return result{}, err
		}
	}
	timeout := time.NewTimer(2 * time.Minute)
	defer timeout.Stop()
	switch {
	case waitAll(timeout.C, rec.all, done.at[0]):
		if profile != "" {
			pprof.StopCPUProfile()
		}
		if memProfile != "" && second {
			runtime.GC()
			if err := writeHeapProfile(memProfile); err != nil {
				return result{}, err
			}
		}
		res.redisCPU, res.procCPU, res.mallocs = t.redisCPU(ctx)-redisCPU0, processCPU()-procCPU0, mallocs()-mallocs0
		res.finishAll = time.Since(start)
		if stats {
			t.commandStats(ctx, false)
		}
	default:
		n, _, _, _, _ := rec.figures()
		return result{}, fmt.Errorf("only %d of %d slots ran and %d were recorded within 2 minutes", n, slots, done.count())
	}
	// Runs of a slot beyond its first would come within a claim's
	// round trips: wait for a quiet spell before counting.
	rec.quiet(300*time.Millisecond, time.Now().Add(5*time.Second))
	res.acquires, res.roundTrips = -baseAcquires, -baseTotal
	for _, c := range counters {
		res.acquires += c.acquire.Load()
		res.roundTrips += c.total.Load()
	}
	if floors != nil {
		if err := floors.measure(ctx, floors.after, time.Time{}); err != nil {
			return result{}, err
		}
		res.floors = floors.take()
	}
	if second {
		at := start.Add(secondGap)
		// Just before the second slot, where there is room for it (twice
		// the last floor's time); else its floor is the one after it.
		if floors != nil && time.Until(at.Add(-200*time.Millisecond)) > 2*floors.took {
			if err := floors.measure(ctx, floors.before, at); err != nil {
				return result{}, err
			}
		}
		<-time.After(time.Until(at.Add(-200 * time.Millisecond)))
		if stats {
			t.commandStats(ctx, true)
		}
		redisCPU0, procCPU0 := t.redisCPU(ctx), processCPU()
		timeout := time.NewTimer(2 * time.Minute)
		defer timeout.Stop()
		switch {
		case waitAll(timeout.C, rec2.all, done.at[1]):
			if stats {
				fmt.Println("# the second slot (statistics reset 200 ms before it):")
				t.commandStats(ctx, false)
			}
		default:
			n, _, _, _, _ := rec2.figures()
			return result{}, fmt.Errorf("second slot: only %d of %d slots ran and %d were recorded within 2 minutes", n, slots, done.count()-slots)
		}
		s2 := result{redisCPU: t.redisCPU(ctx) - redisCPU0, procCPU: processCPU() - procCPU0, finishAll: time.Since(at)}
		rec2.quiet(300*time.Millisecond, time.Now().Add(5*time.Second))
		s2.slots, s2.runs, s2.dups, s2.p50, s2.p99 = rec2.figures()
		s2.claimAll = rec2.last.Sub(at)
		if floors != nil {
			if err := floors.measure(ctx, floors.after, time.Time{}); err != nil {
				return result{}, err
			}
			s2.floors = floors.take()
		}
		res.second = &s2
	}
	for _, s := range scheds {
		if err := s.Stop(ctx); err != nil {
			return result{}, err
		}
	}
	res.slots, res.runs, res.dups, res.p50, res.p99 = rec.figures()
	res.claimAll = rec.last.Sub(start)
	return res, nil
}
