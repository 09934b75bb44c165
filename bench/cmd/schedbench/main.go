// Command schedbench measures the scheduler at scale: 10,000 slots (jobs x
// partitions) due in the same second across 3 scheduler instances on one
// Redis. It prints:
//
//	bench: scheduler slots=<n> replicas=3 claim_all_ms=<x> lag_p50_ms=<x> lag_p99_ms=<x>
//	bench: scheduler roundtrips acquire_per_slot_per_replica=<x> total_per_slot=<x>
//	bench: scheduler cpu redis_ms=<x> schedulers_ms=<x>
//	bench: scheduler memory bytes_per_registered_job=<x>
//
// Run it from bench/ with REDIS_URL set (default redis://127.0.0.1:6379/0).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

func main() {
	jobs := flag.Int("jobs", 100, "jobs")
	parts := flag.Int("partitions", 100, "partitions per job")
	replicas := flag.Int("replicas", 3, "scheduler instances")
	claims := flag.Int("claims", 256, "MaxConcurrentClaims per instance")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the slot (from its start until every run started) to this file")
	flag.Parse()
	if err := run(*jobs, *parts, *replicas, *claims); err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
}

var (
	cpuProfile                string
	redisCPUUsed, procCPUUsed time.Duration
)

// redisCPU returns the CPU time (user + system) the Redis server used so
// far, from INFO cpu; 0 when it cannot tell.
func redisCPU(ctx context.Context, opts *redis.Options) time.Duration {
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
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

// isAcquire: the acquire script is the only one with two keys, a lease key
// and its fence counter (EVALSHA sha 2 <prefix>lease:{name}
// <prefix>lease:{name}:fence ...); release's second key is the waiting
// flag.
func (c *counter) isAcquire(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) <= 4 || fmt.Sprint(args[2]) != "2" {
		return false
	}
	lk, _ := args[3].(string)
	fk, _ := args[4].(string)
	return strings.HasSuffix(lk, "}") && strings.Contains(lk, "lease:") && fk == lk+":fence"
}

func run(nJobs, nParts, nReplicas, claims int) error {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	opts.PoolSize = claims + 16
	prefix := fmt.Sprintf("holdfast-schedbench:%d:", time.Now().UnixNano())
	defer cleanup(opts, prefix)

	partitions := make([]string, nParts)
	for i := range partitions {
		partitions[i] = fmt.Sprintf("p%03d", i)
	}
	slots := nJobs * nParts
	// Far enough ahead for every instance's recovery claim at Start (one
	// per job and partition) to be over before the slots come due.
	start := time.Now().Truncate(time.Second).Add(10 * time.Second)

	var (
		mu   sync.Mutex
		lags []time.Duration
		last time.Time
		all  = make(chan struct{})
	)
	fn := func(_ context.Context, r scheduler.Run) error {
		lag := time.Since(r.At)
		mu.Lock()
		defer mu.Unlock()
		lags = append(lags, lag)
		if len(lags) == slots {
			last = time.Now()
			close(all)
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
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		c := &counter{}
		rdb.AddHook(c)
		counters = append(counters, c)
		leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
		if err != nil {
			return err
		}
		ledger, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
		if err != nil {
			return err
		}
		s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ledger, MaxConcurrentClaims: claims})
		if err != nil {
			return err
		}
		for j := range nJobs {
			err := s.Register(scheduler.Job{
				Name: fmt.Sprintf("job%03d", j), Spec: "* * * * * *", Partitions: partitions, LeaseTTL: 10 * time.Second,
				StartAt: start, EndAt: start.Add(time.Second), Run: fn,
			})
			if err != nil {
				return err
			}
		}
		scheds = append(scheds, s)
		if len(scheds) == 1 {
			runtime.GC()
			runtime.ReadMemStats(&after)
		}
	}
	perJob := float64(after.HeapAlloc-before.HeapAlloc) / float64(nJobs)
	perUnit := float64(after.HeapAlloc-before.HeapAlloc) / float64(slots)

	ctx := context.Background()
	for _, s := range scheds {
		if err := s.Start(ctx); err != nil {
			return err
		}
	}
	// Count round trips from just before the slot: the recovery claims
	// at Start are not part of the claim cost.
	<-time.After(time.Until(start.Add(-200 * time.Millisecond)))
	redisCPU0, procCPU0 := redisCPU(ctx, opts), processCPU()
	var baseAcquires, baseTotal int64
	for _, c := range counters {
		baseAcquires += c.acquire.Load()
		baseTotal += c.total.Load()
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	timeout := time.NewTimer(2 * time.Minute)
	defer timeout.Stop()
	select {
	case <-all:
		pprof.StopCPUProfile()
		redisCPUUsed, procCPUUsed = redisCPU(ctx, opts)-redisCPU0, processCPU()-procCPU0
	case <-timeout.C:
		return fmt.Errorf("only %d of %d slots ran within 2 minutes", len(lags), slots)
	}
	for _, s := range scheds {
		if err := s.Stop(ctx); err != nil {
			return err
		}
	}

	slices.Sort(lags)
	pct := func(p float64) float64 { return float64(lags[int(p*float64(len(lags)-1))].Microseconds()) / 1000 }
	acquires, total := -baseAcquires, -baseTotal
	for _, c := range counters {
		acquires += c.acquire.Load()
		total += c.total.Load()
	}
	fmt.Printf("bench: scheduler slots=%d replicas=%d claim_all_ms=%.0f lag_p50_ms=%.1f lag_p99_ms=%.1f\n",
		slots, nReplicas, float64(last.Sub(start).Microseconds())/1000, pct(0.50), pct(0.99))
	fmt.Printf("bench: scheduler roundtrips acquire_per_slot_per_replica=%.2f total_per_slot=%.2f\n",
		float64(acquires)/float64(slots*nReplicas), float64(total)/float64(slots))
	fmt.Printf("bench: scheduler cpu redis_ms=%.0f schedulers_ms=%.0f (from 200 ms before the slot until every run started)\n",
		redisCPUUsed.Seconds()*1000, procCPUUsed.Seconds()*1000)
	fmt.Printf("bench: scheduler memory bytes_per_registered_job=%.0f bytes_per_job_partition=%.0f (%d partitions)\n",
		perJob, perUnit, nParts)
	return nil
}

func cleanup(opts *redis.Options, prefix string) {
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
