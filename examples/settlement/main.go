// Command settlement is the holdfast demo: three replicas schedule the same
// daily-settlement job; the holder of one slot is frozen (SIGSTOP) past its
// lease TTL, another replica takes over, and the frozen one's late write is
// rejected by the sink because its fencing token is stale.
//
//	go run ./examples/settlement            # embedded: miniredis + in-memory fenced store
//	REDIS_URL=redis://127.0.0.1:6379/0 \
//	DATABASE_URL=postgres://root@127.0.0.1:5432/test \
//	go run ./examples/settlement            # real Redis and PostgreSQL
//	DATABASE_URL=postgres://root@127.0.0.1:5432/test \
//	go run ./examples/settlement -backend postgres  # PostgreSQL alone: leases, ledger and sink
//	go run ./examples/settlement -unfenced  # negative control: the sink checks no token
//	go run ./examples/settlement -console   # then serve the admin console until Ctrl-C
//
// It ends with one line measured from the sink:
//
//	summary: slots=10 ran_once=10 skipped=0 duplicates=0 missed=0 stale_rejected=1
//
// skipped counts slots the ledger recorded skipped by the job's overlap
// policy (the default skips a slot that comes due while a run is in
// progress: on a busy machine, the takeover's catch-up can still be running
// when the next slot fires); the demo prints each with its reason.
//
// and exits non-zero when duplicates or missed slots were found, or no stale
// write was rejected (with -unfenced: when no duplicate was found). It never
// hangs: past -limit it stops the replicas, prints the table and the
// summary of what the sink holds, and a FAILED line saying what it was
// still waiting for.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"
)

func main() {
	var (
		rc       replicaConfig
		start    string
		replicas = flag.Int("replicas", 3, "replica processes")
		victim   = flag.Int("victim", 3, "the holder of this slot (1-based) meets the fault; on a busy host that skipped it (overlap), the first slot run after it")
		fault    = flag.String("fault", "stop", "stop: SIGSTOP the victim past its TTL, then SIGCONT; kill: SIGKILL and restart it; none")
		backend  = flag.String("backend", "redis", "redis: leases and ledger on Redis (embedded unless REDIS_URL and DATABASE_URL are set); postgres: leases, ledger and sink on DATABASE_URL alone")
		limit    = flag.Duration("limit", 0, "give up, print the summary and fail after this long (default: the slots + 35s)")
		console  = flag.Bool("console", false, "after the summary, serve the admin console on a printed loopback URL until Ctrl-C")
	)
	flag.StringVar(&rc.ID, "replica", "", "internal: run as the replica with this id")
	flag.StringVar(&rc.Backend, "replica-backend", "", "internal: postgres for leases and ledger on -pg")
	flag.StringVar(&rc.RedisURL, "redis", "", "internal: Redis URL")
	flag.StringVar(&rc.StoreURL, "store", "", "internal: embedded store URL")
	flag.StringVar(&rc.PGURL, "pg", "", "internal: PostgreSQL URL")
	flag.StringVar(&rc.Schema, "schema", "", "internal: PostgreSQL schema")
	flag.StringVar(&rc.Prefix, "prefix", "", "internal: Redis key prefix")
	flag.StringVar(&start, "start", "", "internal: first slot (RFC 3339)")
	flag.IntVar(&rc.Slots, "slots", 10, "slots to run (one a second)")
	flag.DurationVar(&rc.TTL, "ttl", 2*time.Second, "job lease TTL")
	flag.DurationVar(&rc.Work, "work", 200*time.Millisecond, "time one settlement takes")
	flag.BoolVar(&rc.Unfenced, "unfenced", false, "negative control: the sink does not check tokens")
	flag.StringVar(&rc.Trace, "trace", "", "write each replica's OpenTelemetry spans (JSON) to `PATH`.<replica>; with OTEL_EXPORTER_OTLP_ENDPOINT set they go to that OTLP/HTTP collector instead")
	flag.Parse()

	if rc.ID != "" {
		t, err := time.Parse(time.RFC3339, start)
		if err != nil {
			fmt.Fprintln(os.Stderr, "settlement: -start:", err)
			os.Exit(2)
		}
		rc.Start = t
		if err := runReplica(rc); err != nil {
			fmt.Fprintln(os.Stderr, "settlement:", err)
			os.Exit(1)
		}
		return
	}

	if *victim < 1 || *victim > rc.Slots || *replicas < 2 || (*fault != "stop" && *fault != "kill" && *fault != "none") ||
		(*backend != "redis" && *backend != backendPostgres) {
		fmt.Fprintln(os.Stderr, "settlement: want -replicas >= 2, 1 <= -victim <= -slots, -fault stop|kill|none, -backend redis|postgres")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	t, err := runDemo(ctx, demoConfig{
		Backend: *backend, Replicas: *replicas, Slots: rc.Slots, Victim: *victim - 1, Fault: *fault,
		TTL: rc.TTL, Work: rc.Work, Unfenced: rc.Unfenced, Trace: rc.Trace, Limit: *limit, Console: *console, Out: os.Stdout,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "settlement:", err)
		os.Exit(1)
	}
	ok := t.duplicates == 0 && t.missed == 0 && (t.staleRejected >= 1 || *fault != "stop")
	if rc.Unfenced {
		ok = t.duplicates >= 1 // the control must show the damage
	}
	if !ok {
		fmt.Fprintln(os.Stderr, "settlement: the figures above break the promise")
		os.Exit(1)
	}
}
