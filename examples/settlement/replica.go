package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// replicaConfig is what the coordinator hands each replica on its command
// line.
type replicaConfig struct {
	ID       string
	Backend  string // "" (Redis) or backendPostgres
	RedisURL string
	StoreURL string // embedded mode: the coordinator's sink
	PGURL    string // real mode
	Schema   string
	Prefix   string
	Start    time.Time
	Slots    int
	TTL      time.Duration
	Work     time.Duration
	Unfenced bool
	Trace    string // spans to Trace.<ID> (traceProvider)
}

// event is one line a replica prints on stdout for the coordinator.
type event struct {
	Ev      string      `json:"ev"` // ready | run | write
	Replica string      `json:"replica"`
	Slot    time.Time   `json:"slot,omitzero"`
	Token   fence.Token `json:"token,omitempty"`
	Attempt int         `json:"attempt,omitempty"`
	Result  string      `json:"result,omitempty"` // accepted | stale | error: ...
}

type emitter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (e *emitter) emit(ev event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.enc.Encode(ev)
}

// runReplica is one replica process: a scheduler with the daily-settlement
// job, until SIGTERM, then a graceful Stop.
func runReplica(cfg replicaConfig) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	out := &emitter{enc: json.NewEncoder(os.Stdout)}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("replica", cfg.ID)
	flush, err := traceProvider(ctx, cfg)
	if err != nil {
		return err
	}
	defer flush()

	var sink store
	if cfg.PGURL != "" {
		pg, err := openPG(ctx, cfg.PGURL, cfg.Schema, cfg.Unfenced)
		if err != nil {
			return err
		}
		sink = pg
	} else {
		sink = &httpStore{url: cfg.StoreURL, client: &http.Client{Timeout: 5 * time.Second}}
	}
	defer sink.Close()

	var (
		leases *lease.Client
		ldg    ledger.Ledger
	)
	if cfg.Backend == backendPostgres {
		pg, ok := sink.(*pgStore)
		if !ok {
			return errors.New("-backend postgres needs -pg")
		}
		leases, _, ldg, err = pgScheduling(pg, logger)
	} else {
		var rdb *redis.Client
		rdb, leases, _, ldg, err = redisScheduling(cfg, logger)
		if rdb != nil {
			defer rdb.Close()
		}
	}
	if err != nil {
		return err
	}
	// The holder label names the replica in the console, the API and the
	// logs (all replicas of the demo share one host name).
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg, Logger: logger, Holder: holderLabel(cfg)})
	if err != nil {
		return err
	}
	err = s.Register(scheduler.Job{
		Name:     "daily-settlement",
		Spec:     "* * * * * *", // every second, for the demo; "0 2 * * *" in real life
		Zone:     "UTC",
		LeaseTTL: cfg.TTL,
		StartAt:  cfg.Start,
		EndAt:    cfg.Start.Add(time.Duration(cfg.Slots) * time.Second),
		Run:      settle(cfg, sink, out),
	})
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	out.emit(event{Ev: "ready", Replica: cfg.ID})
	<-ctx.Done()
	grace, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Stop(grace); err != nil {
		return fmt.Errorf("replica %s: stop: %w", cfg.ID, err)
	}
	return nil
}

// settle is the daily-settlement job of one replica: it reports the run,
// computes the settlement (cfg.Work) and writes it to the sink with the
// run's fence, reporting the sink's answer.
func settle(cfg replicaConfig, sink store, out *emitter) func(context.Context, scheduler.Run) error {
	return func(ctx context.Context, run scheduler.Run) error {
		out.emit(event{Ev: "run", Replica: cfg.ID, Slot: run.At, Token: run.Token, Attempt: run.Attempt})
		// The settlement is computed here. This job deliberately does not
		// look at ctx before its write: a pause (GC, VM freeze, SIGSTOP)
		// can land between any check and the write, so only the sink's
		// token check makes the write safe.
		<-time.After(cfg.Work)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err := sink.Write(wctx, run.At, cfg.ID, run.Holder())
		result := "accepted"
		switch {
		case errors.Is(err, fence.ErrStaleToken):
			result = "stale"
		case err != nil:
			result = "error: " + err.Error()
		}
		out.emit(event{Ev: "write", Replica: cfg.ID, Slot: run.At, Token: run.Token, Attempt: run.Attempt, Result: result})
		return err
	}
}

// holderLabel is the replica's holder label (lease and scheduler
// Options.Holder): "replica-" + its ID, "" for none (the console and the
// coordinator hold no lease).
func holderLabel(cfg replicaConfig) string {
	if cfg.ID == "" {
		return ""
	}
	return "replica-" + cfg.ID
}

// redisScheduling returns a replica's Redis client (for the caller to
// close, also on error), lease client, its backend (for the console's
// leases view) and ledger. It builds the lease backend itself, as a
// program that needs the backend (here as a leasedriver.Inspector) does;
// lease.New(rdb, ...) is the shortcut for one that does not.
func redisScheduling(cfg replicaConfig, logger *slog.Logger) (*redis.Client, *lease.Client, leasedriver.Inspector, ledger.Ledger, error) {
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	rdb := redis.NewClient(opts)
	b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: cfg.Prefix + "lease:", Holder: holderLabel(cfg)})
	if err != nil {
		return rdb, nil, nil, nil, err
	}
	leases, err := lease.NewWithBackend(b, lease.Options{Logger: logger})
	if err != nil {
		return rdb, nil, nil, nil, err
	}
	ldg, err := redisledger.New(rdb, redisledger.Options{Prefix: cfg.Prefix + "ledger:"})
	if err != nil {
		return rdb, nil, nil, nil, err
	}
	return rdb, leases, b, ldg, nil
}
