package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// serveConsole runs, after the summary, one more replica of
// daily-settlement in this process ("console": it runs what an operator
// asks for, writing to the same sink) and serves its admin console
// (schedhttp) on a loopback port with a random bearer token, until ctx
// ends (Ctrl-C). The leases view reads the demo's lease backend when it
// is an Inspector (Redis; not PostgreSQL).
func serveConsole(ctx context.Context, out io.Writer, rc replicaConfig, sink store) error {
	leases, inspector, ldg, closeBackend, err := consoleBackend(rc, sink)
	if err != nil {
		return err
	}
	defer closeBackend()
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn})).With("replica", "console")
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg, Logger: logger})
	if err != nil {
		return err
	}
	err = s.Register(scheduler.Job{
		Name: "daily-settlement", Spec: "* * * * * *", Zone: "UTC", LeaseTTL: rc.TTL,
		StartAt: rc.Start, EndAt: rc.Start.Add(time.Duration(rc.Slots) * time.Second),
		Run: func(ctx context.Context, run scheduler.Run) error {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return sink.Write(wctx, run.At, "console", run.Holder())
		},
	})
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	defer func() {
		grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.Stop(grace)
	}()

	token := randomID() + randomID()
	cfg := schedhttp.Options{Logger: logger,
		Authorizer: func(r *http.Request, _ schedhttp.Action, _ string) error {
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) != 1 {
				return schedhttp.ErrUnauthenticated // 401: no token, or not this one
			}
			return nil
		}}
	cfg.Leases = inspector
	admin, err := schedhttp.New(s, cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: admin, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	// One link that opens the console signed in: the token rides in the
	// fragment, which the browser never sends to a server; the page keeps
	// it in sessionStorage and drops it from the address bar.
	fmt.Fprintf(out, "console: http://%s/#token=%s (signed in; the token stays in the browser tab; Ctrl-C to stop)\n", ln.Addr(), token)
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	if err == nil {
		err = <-served
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// consoleBackend opens the demo's leases and ledger again, for the
// console's replica: on Redis (rc.RedisURL, rc.Prefix) or on the
// PostgreSQL sink's pool.
func consoleBackend(rc replicaConfig, sink store) (*lease.Client, leasedriver.Inspector, ledger.Ledger, func(), error) {
	if pg, ok := sink.(*pgStore); ok && rc.Backend == backendPostgres {
		leases, in, ldg, err := pgScheduling(pg, nil)
		return leases, in, ldg, func() {}, err
	}
	rdb, leases, in, ldg, err := redisScheduling(rc, nil)
	closeRDB := func() {
		if rdb != nil {
			_ = rdb.Close()
		}
	}
	if err != nil {
		closeRDB()
		return nil, nil, nil, nil, err
	}
	return leases, in, ldg, closeRDB, nil
}
