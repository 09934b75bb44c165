package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/sinks/sinktest"
)

// Environment of a holder worker.
const (
	envRedis    = "CHAOS_REDIS_ADDR"
	envSchema   = "CHAOS_SCHEMA"
	envWorkerID = "CHAOS_WORKER_ID"
)

func init() { workers["holder"] = holderWorker }

// wireOp is an operation as a worker reports it on stdout, times in Unix
// nanoseconds (one clock for every process of the machine).
type wireOp struct {
	Client   int    `json:"client"`
	Resource string `json:"res"`
	Read     bool   `json:"read,omitempty"`
	Token    uint64 `json:"tok,omitempty"`
	Owner    string `json:"owner,omitempty"`
	Value    string `json:"val,omitempty"`
	Outcome  string `json:"out"`
	Current  uint64 `json:"cur,omitempty"`
	Call     int64  `json:"call"`
	Return   int64  `json:"ret"`
}

func (w wireOp) porcupine() porcupine.Operation {
	in := sinktest.Input{Resource: w.Resource, Read: w.Read, Token: fence.Token(w.Token), Owner: w.Owner, Value: w.Value}
	out := sinktest.Output{Outcome: sinktest.Accepted}
	switch {
	case w.Read:
		out.Value, out.Token = w.Value, fence.Token(w.Current)
		in.Value = ""
	case w.Outcome == "stale":
		out.Outcome, out.Current = sinktest.Stale, fence.Token(w.Current)
	}
	return porcupine.Operation{ClientId: w.Client, Input: in, Call: w.Call, Output: out, Return: w.Return}
}

// holderWorker is a worker process: for each "trial <lease> <resource>
// <ttl ms> <guarded 0|1>" on stdin it acquires the lease, checks that it
// holds it and prints "ready"; at "go" it writes through the sink (with a
// context of its own: a holder that checked its lease and was then paused
// writes anyway), reads the register back, releases, and prints "op" lines
// and "done".
func holderWorker() error {
	id, _ := strconv.Atoi(os.Getenv(envWorkerID))
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL())
	if err != nil {
		return err
	}
	defer pool.Close()
	s, err := openSink(ctx, pool, os.Getenv(envSchema), false)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis)})
	defer rdb.Close()
	c, err := lease.New(rdb, lease.Options{Prefix: "chaos:", RetryMax: 20 * time.Millisecond})
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	lines := bufio.NewScanner(os.Stdin)
	next := func() (string, bool) {
		if !lines.Scan() {
			return "", false
		}
		return lines.Text(), true
	}
	for {
		cmd, ok := next()
		if !ok || cmd == "quit" {
			return lines.Err()
		}
		var (
			lname, res string
			ttlMS, g   int
		)
		if _, err := fmt.Sscanf(cmd, "trial %s %s %d %d", &lname, &res, &ttlMS, &g); err != nil {
			return fmt.Errorf("command %q: %w", cmd, err)
		}
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		l, err := acquire(actx, c, lname, time.Duration(ttlMS)*time.Millisecond)
		if err != nil || l.Err() != nil {
			cancel()
			fmt.Printf("noacq %v\n", err)
			continue
		}
		fmt.Printf("ready %d\n", l.Token())
		if cmd, ok := next(); !ok || cmd != "go" {
			cancel()
			return fmt.Errorf("want go, got %q", cmd)
		}
		h := holderOf(l)
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		op := wireOp{Client: id, Resource: res, Token: uint64(h.Token), Owner: h.Owner, Value: fmt.Sprintf("w%d-%d", id, h.Token), Call: time.Now().UnixNano()}
		err = s.write(wctx, pool, res, h, op.Value, g == 1)
		op.Return = time.Now().UnixNano()
		var stale *fence.StaleTokenError
		switch {
		case err == nil:
			op.Outcome = "ok"
		case errors.As(err, &stale):
			op.Outcome, op.Current = "stale", uint64(stale.Current)
		default:
			wcancel()
			cancel()
			return fmt.Errorf("write: %w", err)
		}
		_ = out.Encode(op)
		rd := wireOp{Client: id, Resource: res, Read: true, Outcome: "ok", Call: time.Now().UnixNano()}
		v, tok, err := s.read(wctx, pool, res)
		rd.Return = time.Now().UnixNano()
		wcancel()
		if err != nil {
			cancel()
			return fmt.Errorf("read: %w", err)
		}
		rd.Value, rd.Current = v, uint64(tok)
		_ = out.Encode(rd)
		_ = l.Release(ctx) // the paused holder's: lease.ErrNotHeld
		cancel()
		fmt.Println("done")
	}
}

// workerProc is one worker process and its stdout lines.
type workerProc struct {
	id    int
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

// startWorker re-executes the test binary as a worker of mode, stopped and
// waited for when the test ends.
func startWorker(t *testing.T, mode string, id int, env ...string) *workerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, envWorker+"="+mode, envWorkerID+"="+strconv.Itoa(id))...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	outPipe, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	w := &workerProc{id: id, cmd: cmd, in: in, lines: make(chan string, 64)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(w.lines)
		sc := bufio.NewScanner(outPipe)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_, _ = io.WriteString(w.in, "quit\n")
		_ = w.in.Close()
		done := make(chan struct{})
		go func() {
			for range w.lines { // drain, so the reader ends
			}
			<-read
			close(done)
		}()
		timer := time.NewTimer(10 * time.Second)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			_ = w.cmd.Process.Kill()
			<-done
		}
		_ = w.cmd.Wait()
	})
	return w
}

func (w *workerProc) send(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(w.in, line+"\n")
	require.NoError(t, err, "worker %d", w.id)
}

func (w *workerProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, w.cmd.Process.Signal(sig), "worker %d", w.id)
}

// expect waits for the next line of w, up to limit; lines starting with
// "op " are decoded into ops on the way.
func (w *workerProc) expect(t *testing.T, prefix string, limit time.Duration, ops *[]wireOp) string {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-w.lines:
			require.True(t, ok, "worker %d exited", w.id)
			if strings.HasPrefix(line, "{") {
				var op wireOp
				require.NoError(t, json.Unmarshal([]byte(line), &op), "%q", line)
				*ops = append(*ops, op)
				continue
			}
			require.True(t, strings.HasPrefix(line, prefix), "worker %d: want %q, got %q", w.id, prefix, line)
			return line
		case <-timer.C:
			t.Fatalf("worker %d: no %q within %v", w.id, prefix, limit)
		}
	}
}

// firstReady waits for "ready" from any of ws and returns that worker.
// One select over their channels: no line is taken from a worker that
// was not chosen.
func firstReady(t *testing.T, ws []*workerProc, limit time.Duration) *workerProc {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)}}
	for _, w := range ws {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.lines)})
	}
	i, v, ok := reflect.Select(cases)
	if i == 0 {
		t.Fatalf("no worker acquired within %v", limit)
	}
	w := ws[i-1]
	require.True(t, ok, "worker %d exited", w.id)
	require.True(t, strings.HasPrefix(v.String(), "ready"), "worker %d: %q", w.id, v.String())
	return w
}

// TestHolderSIGSTOPedPastItsTTL: three worker processes contend for a
// lease. The first to hold it checks that it does, prints ready and is
// SIGSTOPed before its write: its keep-alive stops with it and the key
// expires. The two others acquire in turn and write. The first is then
// SIGCONTed and writes with its old token. Every write and a read after it
// go into a porcupine history checked against sinktest.Model. Control: the
// sink without its fence check, which accepts the late write: the history
// is not linearizable.
func TestHolderSIGSTOPedPastItsTTL(t *testing.T) {
	t.Parallel()
	const (
		name = "holder-sigstop"
		ttl  = 500 * time.Millisecond
	)
	n := trials(200)
	r := newReport(name, n, controls(n))
	s, pool := newSink(t, "chaos_sigstop_")
	srv := redisproc.Start(t)
	var ws []*workerProc
	for id := range 3 {
		ws = append(ws, startWorker(t, "holder", id, envRedis+"="+srv.Addr(), envSchema+"="+s.schema))
	}
	bar := newProgress(name, n+r.controls)

	var stale, lateAttempted, linearizable int
	for i := range n + r.controls {
		guarded := i < n
		lname, res := fmt.Sprintf("sigstop-%d", i), fmt.Sprintf("sigstop-%d", i)
		g := 0
		if guarded {
			g = 1
		}
		for _, w := range ws {
			w.send(t, fmt.Sprintf("trial %s %s %d %d", lname, res, ttl.Milliseconds(), g))
		}
		var ops []wireOp
		victim := firstReady(t, ws, 30*time.Second)
		victim.signal(t, syscall.SIGSTOP)
		var others []*workerProc
		for _, w := range ws {
			if w != victim {
				others = append(others, w)
			}
		}
		// The successors acquire once the frozen holder's key expired, one
		// after the other; each writes and releases.
		for range others {
			w := firstReady(t, others, 30*time.Second)
			w.send(t, "go")
			w.expect(t, "done", 30*time.Second, &ops)
			others = remove(others, w)
		}
		victim.signal(t, syscall.SIGCONT)
		victim.send(t, "go")
		victim.expect(t, "done", 30*time.Second, &ops)

		h := sinktest.History{}
		var late *wireOp
		for k := range ops {
			h.Operations = append(h.Operations, ops[k].porcupine())
			if ops[k].Client == victim.id && !ops[k].Read {
				late = &ops[k]
			}
		}
		require.NotNil(t, late, "the frozen holder's write was reported")
		// The late write was sent after both successors' writes returned,
		// and Postgres answered it.
		attempted := late.Call >= maxReturn(ops, victim.id) && late.Outcome != ""
		checkErr := h.Check(30 * time.Second)
		require.False(t, errors.Is(checkErr, sinktest.ErrCheckTimeout), "%v", checkErr)
		es, err := s.effects(context.Background(), pool, res)
		require.NoError(t, err)
		sa := staleAccepted(es)
		if guarded {
			stale += sa
			if attempted {
				lateAttempted++
			}
			if checkErr == nil {
				linearizable++
			} else {
				t.Logf("trial %d: %v", i, checkErr)
			}
		} else if sa > 0 && errors.Is(checkErr, sinktest.ErrNotLinearizable) {
			r.fired++
		}
		bar.step()
	}
	r.violations = stale + (n - linearizable)
	r.add("stale_accepted", stale)
	r.ratio("late_write_attempted", lateAttempted, n)
	r.ratio("linearizable", linearizable, n)
	r.finish(t)
	require.GreaterOrEqual(t, lateAttempted, mostTrials(n), "late writes attempted in all trials but 5%% (at least one)")
}

// maxReturn is the latest return time of the writes by others than client.
func maxReturn(ops []wireOp, client int) int64 {
	var m int64
	for _, op := range ops {
		if op.Client != client && !op.Read {
			m = max(m, op.Return)
		}
	}
	return m
}

func remove(ws []*workerProc, w *workerProc) []*workerProc {
	out := ws[:0:0]
	for _, x := range ws {
		if x != w {
			out = append(out, x)
		}
	}
	return out
}
