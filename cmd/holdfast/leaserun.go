package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// Exit codes of lease run besides its command's own (leaseRunCodesHelp).
const (
	exitLeaseHeld     = 75  // EX_TEMPFAIL: the lease is held by another; CMD not started
	exitLeaseLost     = 124 // the lease was lost while CMD ran: CMD stopped (as timeout(1))
	exitCannotInvoke  = 126 // CMD found but could not be started
	exitNotFoundCmd   = 127 // CMD not found
	exitInterrupted   = 130 // holdfast got SIGINT or SIGTERM: CMD stopped, lease released
	defaultStopGrace  = 10 * time.Second
	defaultLeaseRunTT = 30 * time.Second
)

const leaseRunCodesHelp = `Exit codes of lease run:
  CMD's own  CMD ended by itself while the lease was held (128+N: killed by signal N)
  2          usage: bad flags or arguments
  1          holdfast failed before CMD started (Redis unreachable, ...)
  75         the lease is held by another holder (within --wait): CMD not started
  124        the lease was lost while CMD ran: CMD was stopped (SIGTERM, then
             SIGKILL after --grace)
  126        CMD could not be started (not executable)
  127        CMD not found
  130        holdfast was interrupted (SIGINT, SIGTERM): CMD was stopped the same way
`

// Environment of CMD: the lease's fence, as the sinks take it
// (fence.Holder: scope, token, owner), and who holds it.
const (
	envLease  = "HOLDFAST_LEASE"        // the lease name
	envScope  = "HOLDFAST_FENCE_SCOPE"  // the token's scope: the lease name
	envToken  = "HOLDFAST_FENCE_TOKEN"  // the fencing token, decimal
	envOwner  = "HOLDFAST_FENCE_OWNER"  // the owner: a write capability (docs/security.md)
	envHolder = "HOLDFAST_HOLDER"       // the holder label (--holder)
	envTTL    = "HOLDFAST_LEASE_TTL_MS" // the lease's TTL in ms
)

func leaseRunCommand() command {
	c := command{
		name: "lease run", args: "NAME [--ttl D] [--wait D] [--grace D] [--holder L] -- CMD [ARGS...]",
		summary: "run a command while holding a lease; stop it when the lease is lost",
		help: `Takes the lease NAME (Redis: --redis, --prefix), runs CMD while holding it
(renewed every TTL/3), and releases it when CMD ends. CMD gets the lease's
fence in its environment, as a sink takes it (fence.Holder):
  ` + envLease + `         the lease name
  ` + envScope + `   the token's scope (the lease name)
  ` + envToken + `   the fencing token (decimal)
  ` + envOwner + `   the lease owner: with the token, a write capability
                         (docs/security.md); never printed
  ` + envHolder + `        the holder label (--holder, default the host name)
  ` + envTTL + `  the lease TTL in ms
When the lease is lost (not renewed within its trust window, taken over
after a stall), CMD gets SIGTERM, then SIGKILL after --grace, and holdfast
exits 124: its sinks refuse CMD's writes from then on anyway (a newer holder
has a larger token). CMD runs in a process group of its own; the signals go
to the group. Ctrl-C (or SIGTERM) to holdfast stops CMD the same way.
Unlike etcdctl lock, which never stops its command, a lease loss ends CMD.

A Redis that may evict keys (a maxmemory-policy other than noeviction) is
refused, as by lease.New: --allow-eviction runs anyway (the sinks still
fence a holder whose key was evicted). Where CONFIG GET is refused (managed
Redis), declare the provider's policy with --eviction-policy.

` + leaseRunCodesHelp + `
Examples:
  holdfast lease run nightly-export --ttl 30s --redis redis://127.0.0.1:6379/0 -- ./export.sh
  holdfast lease run reindex --ttl 1m --wait 5m --grace 30s -- psql -f reindex.sql`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		var lf leaseFlags
		var ttl, wait, grace time.Duration
		var holder string
		fs := a.flagSet(c)
		fs.StringVar(&lf.prefix, "prefix", redislease.DefaultPrefix, "lease key `prefix` (lease.Options.Prefix)")
		fs.DurationVar(&ttl, "ttl", defaultLeaseRunTT, "the lease's TTL: a stalled holder loses it within this `duration`")
		fs.DurationVar(&wait, "wait", 0, "wait up to this `duration` for a held lease (default: try once, exit 75 when held)")
		fs.DurationVar(&grace, "grace", defaultStopGrace, "after SIGTERM, wait this `duration` before SIGKILL")
		fs.StringVar(&holder, "holder", "", "holder `label` shown in lease views (default: the host name)")
		var eviction redislease.Eviction
		fs.StringVar(&eviction.Policy, "eviction-policy", "", "declare the Redis maxmemory-`policy` where CONFIG GET is refused (managed Redis; lease.Options.Eviction.Policy)")
		fs.BoolVar(&eviction.AllowEviction, "allow-eviction", false, "run on a Redis that may evict keys (lease.Options.Eviction.AllowEviction; the sinks still fence)")
		pos, err := a.parse(fs, args, -1)
		if err != nil {
			return err
		}
		if len(pos) < 2 {
			return a.badUsage(fs, "want NAME -- CMD [ARGS...], got %d argument(s)", len(pos))
		}
		if ttl <= 0 || grace < 0 || wait < 0 {
			return a.badUsage(fs, "--ttl must be positive, --wait and --grace not negative")
		}
		if holder == "" {
			holder = hostLabel()
		}
		rdb, err := a.openRedis()
		if err != nil {
			return err
		}
		defer rdb.Close()
		leases, err := lease.New(rdb, lease.Options{Prefix: lf.prefix, Holder: holder, Eviction: eviction})
		if err != nil {
			return usagef("lease run: %v", err)
		}
		l, err := a.acquire(ctx, leases, pos[0], ttl, wait)
		if err != nil {
			return err
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.conn.timeout)
			defer cancel()
			_ = l.Release(rctx)
		}()
		return a.runHeld(ctx, l, holder, ttl, grace, pos[1], pos[2:])
	}
	return c
}

// acquire takes the lease: once, or retrying for up to wait. A lease held
// by another ends the command with exitLeaseHeld.
func (a *app) acquire(ctx context.Context, leases *lease.Client, name string, ttl, wait time.Duration) (*lease.Lease, error) {
	var l *lease.Lease
	var err error
	if wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		l, err = leases.Acquire(wctx, name, ttl)
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (waited %v)", lease.ErrNotAcquired, wait)
		}
	} else {
		actx, cancel := a.withTimeout(ctx)
		defer cancel()
		l, err = leases.TryAcquire(actx, name, ttl)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		// A signal to holdfast while it waited (the wait's error also
		// matches ErrNotAcquired): interrupted, not held elsewhere.
		return nil, &codedError{code: exitInterrupted, err: fmt.Errorf("lease run: %q: interrupted while waiting for the lease: %w", name, err)}
	case errors.Is(err, lease.ErrNotAcquired):
		return nil, &codedError{code: exitLeaseHeld, err: fmt.Errorf("lease run: %q: %w", name, err)}
	case errors.Is(err, lease.ErrInvalidName), errors.Is(err, lease.ErrInvalidTTL):
		return nil, usagef("lease run: %v", err)
	case err != nil:
		return nil, fmt.Errorf("lease run: %q: %w", name, err)
	}
	return l, nil
}

// runHeld runs name args under l and returns the exit: CMD's own status
// when it ends with the lease held, exitLeaseLost when the lease is lost
// first, exitInterrupted when ctx ends (a signal to holdfast).
func (a *app) runHeld(ctx context.Context, l *lease.Lease, holder string, ttl, grace time.Duration, name string, args []string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	h := l.Holder()
	cmd.Env = append(os.Environ(),
		envLease+"="+l.Name(), envScope+"="+h.Scope, envToken+"="+h.Token.String(), envOwner+"="+h.Owner,
		envHolder+"="+holder, envTTL+"="+strconv.FormatInt(ttl.Milliseconds(), 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		code := exitCannotInvoke
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFoundCmd
		}
		return &codedError{code: code, err: fmt.Errorf("lease run: %w", err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }() // ends with CMD; every path below waits for it
	select {
	case err := <-done:
		return exitOf(err)
	case <-l.Done():
		fmt.Fprintf(a.stderr, "holdfast: lease %q lost (%v): stopping %s\n", l.Name(), context.Cause(l.Context()), name)
		stop(cmd, done, grace)
		return &codedError{code: exitLeaseLost, err: fmt.Errorf("lease run: lease %q lost while %s ran: %w", l.Name(), name, context.Cause(l.Context()))}
	case <-ctx.Done():
		stop(cmd, done, grace)
		return &codedError{code: exitInterrupted, err: fmt.Errorf("lease run: interrupted: %s stopped, lease released", name)}
	}
}

// stop sends CMD's process group SIGTERM, then SIGKILL after grace, and
// waits for CMD to end (done).
func stop(cmd *exec.Cmd, done <-chan error, grace time.Duration) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// exitOf turns CMD's end into holdfast's: nil for 0, else a codedError
// with CMD's status (128+N when a signal N killed it).
func exitOf(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return fmt.Errorf("lease run: %w", err)
	}
	code := ee.ExitCode()
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return &codedError{code: code, err: &quietError{err}}
}

// quietError is CMD's own failure: CMD said what it had to say, holdfast
// adds nothing (report prints nothing for it).
type quietError struct{ error }

// hostLabel is the default holder label: the host name when it is a valid
// label, else none.
func hostLabel() string {
	host, err := os.Hostname()
	if err != nil || leasedriver.CheckHolder(host) != nil {
		return ""
	}
	return host
}
