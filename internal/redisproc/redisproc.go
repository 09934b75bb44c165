// Package redisproc starts and controls test-owned redis-server and
// redis-sentinel processes, for tests that need real faults: kill, restart
// without persistence, SIGSTOP, Cluster, Sentinel failover. Launch and
// LaunchCluster start the same servers for programs that are not tests
// (the bench commands), returning errors; their caller ends them with
// Close.
//
// # Processes
//
// Every process listens on 127.0.0.1 only, on a free port below the
// kernel's ephemeral range (so no client socket can take it between a Kill
// and a Restart), runs in its own t.TempDir() with no persistence
// (--save "" --appendonly no), and is killed (SIGKILL) and waited for in
// t.Cleanup. No goroutine outlives the test: each process has one waiter
// goroutine, which returns when the process exits.
//
// A Server's ports are its own from its start to its end (the test's
// cleanup, or Close), also while it is killed: they are claimed against
// every Server of every process that uses this package (go test runs
// packages side by side) with a lock file per port under os.TempDir(). So
// another test's server never answers a client that dials the port of a
// Server that is killed.
//
// # Waiting
//
// Every wait polls every PollInterval until a deadline (StartTimeout,
// ClusterTimeout, FailoverTimeout) and fails the test with the last
// observation and the tail of the process log when it passes. Nothing
// sleeps blindly.
//
// # Skipping
//
// When redis-server is not installed, tests skip with a message, unless
// HOLDFAST_REQUIRE_REDIS_SERVER=1, which makes them fail. They also skip
// when HOLDFAST_SKIP_INTEGRATION=1 (make test-short). The binary is
// redis-server from PATH (or /usr/bin/redis-server); sentinels run as
// "redis-server <conf> --sentinel", so no redis-sentinel link is needed.
package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/testwait"
)

// Timing of the waits.
const (
	// PollInterval is the pause between two checks of a wait.
	PollInterval = 10 * time.Millisecond
	// StartTimeout bounds the wait for a started process to answer PING.
	StartTimeout = 10 * time.Second
	// ClusterTimeout bounds the wait for cluster_state:ok on every node.
	ClusterTimeout = 20 * time.Second
	// FailoverTimeout bounds the wait for a Sentinel setup to become ready
	// and for a failover to complete (about 2 s when all goes well).
	FailoverTimeout = 30 * time.Second
)

// EnvRequire, set to "1", makes a missing redis-server fail the test
// instead of skipping it.
const EnvRequire = "HOLDFAST_REQUIRE_REDIS_SERVER"

// Server is one test-owned redis-server (or sentinel) process. Its methods
// are safe for concurrent use.
type Server struct {
	bin  string
	dir  string
	log  string
	port int
	args []string // argv after the binary, fixed for Restart
	// ownDir: dir was made by Launch, and Close removes it.
	ownDir bool

	mu   sync.Mutex
	proc *proc // nil while killed
	// claims are the Server's ports (its port, a cluster node's bus
	// port), held from start to stop, through Kill and Restart.
	claims []*portClaim
}

// Start starts a redis-server on a free loopback port with no persistence,
// waits until it answers PING, and kills it when the test ends. args are
// extra redis-server arguments ("--maxmemory", "10mb", ...); they come after
// the defaults and so override them.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	return launch(t, "redis", func(port int, dir string) ([]string, error) {
		return append(serverArgs(port, dir), args...), nil
	})
}

// serverArgs are the defaults of every redis-server we start.
func serverArgs(port int, dir string) []string {
	return []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		// A replica's first sync starts at once instead of after 5 s.
		"--repl-diskless-sync-delay", "0",
	}
}

// launch starts a process whose argv build returns for a port and the
// process directory (a t.TempDir()), and kills it when the test ends.
func launch(t testing.TB, kind string, build func(port int, dir string) ([]string, error)) *Server {
	t.Helper()
	bin := binary(t)
	s, err := launchIn(bin, t.TempDir(), kind, build)
	if err != nil {
		t.Fatalf("redisproc: %v", err)
	}
	t.Cleanup(s.stop)
	return s
}

// Launch starts a redis-server as Start does, for a program that is not a
// test (the bench commands): in a fresh directory under os.TempDir(),
// returning its errors. The caller ends it with Close.
func Launch(args ...string) (*Server, error) {
	bin, err := lookBinary()
	if err != nil {
		return nil, fmt.Errorf("redisproc: redis-server not found: %w", err)
	}
	dir, err := os.MkdirTemp("", "redisproc-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	s, err := launchIn(bin, dir, "redis", func(port int, dir string) ([]string, error) {
		return append(serverArgs(port, dir), args...), nil
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	s.ownDir = true
	return s, nil
}

// Close kills the process (SIGKILL), waits for it, and removes the
// directory Launch made. It may be called twice.
func (s *Server) Close() {
	s.stop()
	if s.ownDir {
		_ = os.RemoveAll(s.dir)
	}
}

// launchIn starts a process in dir whose argv build returns for a port and
// dir, retrying with another port when the chosen one was taken in the
// meantime.
func launchIn(bin, dir, kind string, build func(port int, dir string) ([]string, error)) (*Server, error) {
	s := &Server{bin: bin, dir: dir}
	var lastErr error
	for range 10 {
		port, claim, err := freePort()
		if err != nil {
			return nil, err
		}
		args, err := build(port, dir)
		if err != nil {
			claim.release()
			return nil, err
		}
		s.port, s.args, s.log = port, args, logPath(dir, args)
		p, err := s.spawn()
		if err == nil {
			s.proc, s.claims = p, []*portClaim{claim}
			return s, nil
		}
		claim.release()
		lastErr = err
		if !errors.Is(err, errAddrInUse) {
			break
		}
	}
	return nil, fmt.Errorf("start %s: %w", kind, lastErr)
}

// logPath finds the log file in the arguments or the config file.
func logPath(dir string, args []string) string {
	for i, a := range args {
		if a == "--logfile" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return filepath.Join(dir, "sentinel.log")
}

// Addr returns the server's host:port on 127.0.0.1.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory (a t.TempDir()).
func (s *Server) Dir() string { return s.dir }

// Client returns a go-redis client of the server, closed when the test
// ends. configure may adjust the options (timeouts, retries) before the
// client is made.
func (s *Server) Client(t testing.TB, configure ...func(*redis.Options)) *redis.Client {
	t.Helper()
	opts := &redis.Options{Addr: s.Addr()}
	for _, f := range configure {
		f(opts)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Kill kills the process with SIGKILL and waits for it to exit. Its data is
// gone: nothing is persisted. Killing a killed server does nothing.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

// Restart kills the process (if it runs) and starts it again on the same
// port with the same arguments, empty, and waits until it answers PING.
// Clients reconnect on their own: their pooled connections fail once.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	// The port is ours until someone else binds it; a process that has just
	// died may hold it for a moment, so retry while it is in use.
	var p *proc
	err := poll(StartTimeout, func() error {
		var err error
		p, err = s.spawn()
		if errors.Is(err, errAddrInUse) {
			return err
		}
		return stopPolling(err)
	})
	if err != nil {
		t.Fatalf("redisproc: restart %s: %v", s.Addr(), err)
	}
	s.proc = p
}

// Pause stops the process with SIGSTOP: it keeps its connections and data
// but answers nothing (a hung server, a frozen VM) until Resume.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGSTOP)
}

// Resume continues a process stopped by Pause with SIGCONT.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.signal(t, syscall.SIGCONT)
}

func (s *Server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		t.Fatalf("redisproc: %v to %s: not running", sig, s.Addr())
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("redisproc: %v to %s: %v", sig, s.Addr(), err)
	}
}

// LogTail returns the last lines of the process log, for failure messages.
func (s *Server) LogTail() string {
	f, err := os.Open(s.log)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 20 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// stop is the cleanup: kill, wait, and give the ports up.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	for _, c := range s.claims {
		c.release()
	}
	s.claims = nil
}

// hold adds a port claim to those stop gives up.
func (s *Server) hold(c *portClaim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims = append(s.claims, c)
}

func (s *Server) killLocked() {
	if s.proc == nil {
		return
	}
	_ = s.proc.cmd.Process.Kill() // SIGKILL also ends a stopped process
	<-s.proc.exited
	s.proc = nil
}

// errAddrInUse reports that the process could not bind its port.
var errAddrInUse = errors.New("address already in use")

// proc is one running process and the channel its waiter closes.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // from Wait, valid once exited is closed
}

// spawn starts the process and waits until it answers PING. On failure the
// process is gone when spawn returns.
func (s *Server) spawn() (*proc, error) {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = sysProcAttr()
	// Output goes to the log file; stdout/stderr stay /dev/null so that no
	// copying goroutine exists.
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	err := poll(StartTimeout, func() error {
		select {
		case <-p.exited:
			return stopPolling(fmt.Errorf("exited: %v", p.err))
		default:
		}
		return ping(s.Addr())
	})
	if err == nil {
		return p, nil
	}
	_ = cmd.Process.Kill()
	<-p.exited
	log := s.LogTail()
	if strings.Contains(log, "in use") {
		return nil, fmt.Errorf("%s: %w", s.Addr(), errAddrInUse)
	}
	return nil, fmt.Errorf("%s: %v\n%s %s\nlog:\n%s", s.Addr(), err, s.bin, strings.Join(s.args, " "), log)
}

// ping sends one PING over a fresh connection.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING: %q", strings.TrimSpace(line))
	}
	return nil
}

// binary returns the redis-server path, or skips (or fails) the test.
func binary(t testing.TB) string {
	t.Helper()
	if os.Getenv("HOLDFAST_SKIP_INTEGRATION") == "1" {
		t.Skip("redisproc: HOLDFAST_SKIP_INTEGRATION=1")
	}
	bin, err := lookBinary()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("redisproc: redis-server not found (%v) and %s=1", err, EnvRequire)
		}
		t.Skipf("redisproc: redis-server not installed (install redis-server, or run scripts/services.sh; set %s=1 to fail instead)", EnvRequire)
	}
	return bin
}

// lookBinary returns redis-server from PATH, or /usr/bin/redis-server.
func lookBinary() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/redis-server"); serr == nil {
			return "/usr/bin/redis-server", nil
		}
		return "", err
	}
	return bin, nil
}

// Ports are picked at random below the ephemeral range, where the kernel
// never puts a client socket.
var portRange = sync.OnceValues(func() (lo, hi int) {
	lo, hi = 20000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) == 2 {
		if eph, err := strconv.Atoi(f[0]); err == nil && eph > lo+1000 {
			hi = eph
		}
	}
	return lo, hi
})

// freePort returns a loopback port that no other Server has claimed and
// nothing listens on right now, claimed for the caller.
func freePort() (int, *portClaim, error) {
	lo, hi := portRange()
	return freePortOf(func() int { return lo + rand.N(hi-lo) })
}

// freePortOf is freePort over the candidates next returns, 100 at most.
func freePortOf(next func() int) (int, *portClaim, error) {
	for range 100 {
		port := next()
		c, ok, err := claimPort(port)
		if err != nil {
			return 0, nil, err
		}
		if !ok {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			c.release()
			continue
		}
		_ = l.Close()
		return port, c, nil
	}
	return 0, nil, errors.New("no free port in 100 tries")
}

// poll calls check every PollInterval until it returns nil, returns an
// error made by stopPolling, or limit passes (testwait.Poll).
func poll(limit time.Duration, check func() error) error {
	return testwait.Poll(limit, PollInterval, check)
}

// stopPolling makes poll return err at once (nil stays nil).
func stopPolling(err error) error { return testwait.Stop(err) }

// waitFor is poll that fails the test, with the logs of servers.
func waitFor(t testing.TB, limit time.Duration, what string, check func() error, servers ...*Server) {
	t.Helper()
	if err := waitErr(limit, what, check, servers...); err != nil {
		t.Fatalf("redisproc: %v", err)
	}
}

// waitErr is poll whose error names what and carries the logs of servers.
func waitErr(limit time.Duration, what string, check func() error, servers ...*Server) error {
	err := poll(limit, check)
	if err == nil {
		return nil
	}
	var logs strings.Builder
	for _, s := range servers {
		fmt.Fprintf(&logs, "\n--- log of %s:\n%s", s.Addr(), s.LogTail())
	}
	return fmt.Errorf("%s: %w%s", what, err, logs.String())
}

// adminCtx bounds one administrative command.
func adminCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// infoField returns the value of field in an INFO reply, or "".
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
