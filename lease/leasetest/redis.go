package leasetest

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/internal/redisproc"
)

// NewMiniredisClient starts an in-process miniredis and returns a client
// of it, ready for lease.New. Both are closed when the test ends. The
// miniredis answers CONFIG GET maxmemory* as a default Redis does
// (noeviction), so the lease's eviction-policy check passes (see
// redislease.Eviction).
//
// miniredis differs from Redis where leases care: key TTLs move only with
// Miniredis.FastForward (call DriveClock to move them with the wall clock),
// TIME is the wall clock, and there are no CROSSSLOT checks. Test against a
// real Redis too (StartRedis).
func NewMiniredisClient(t testing.TB) (redis.UniversalClient, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	miniconf.Register(mr)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, mr
}

// DriveClockInterval is how often DriveClock moves miniredis's clock.
const DriveClockInterval = 5 * time.Millisecond

// DriveClock makes mr's key expiry follow the wall clock: every
// DriveClockInterval it fast-forwards mr by the time that passed, so a
// lease key expires about when it would on Redis (up to DriveClockInterval
// late). It stops, and waits for its goroutine, when the test ends. Call it
// at most once per mr.
func DriveClock(t testing.TB, mr *miniredis.Miniredis) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(DriveClockInterval)
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
	t.Cleanup(func() { close(quit); <-done })
}

// Server is a test-owned redis-server process: its own port on 127.0.0.1,
// its own directory, no persistence. It is killed when the test ends.
type Server struct {
	srv *redisproc.Server
}

// StartRedis starts a redis-server from PATH on a free loopback port and
// waits until it answers. The test is skipped when redis-server is not
// installed (set HOLDFAST_REQUIRE_REDIS_SERVER=1 to fail instead) or when
// HOLDFAST_SKIP_INTEGRATION=1. args are extra redis-server arguments
// ("--maxmemory", "10mb").
func StartRedis(t testing.TB, args ...string) *Server {
	t.Helper()
	return &Server{srv: redisproc.Start(t, args...)}
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.srv.Addr() }

// Client returns a client of the server, closed when the test ends.
// configure may adjust its options (timeouts, retries) first.
func (s *Server) Client(t testing.TB, configure ...func(*redis.Options)) *redis.Client {
	t.Helper()
	return s.srv.Client(t, configure...)
}

// Restart kills the server and starts it again on the same port, empty:
// every lease key and fence counter is gone, as after a crash without
// persistence. Tokens still increase across it (they never fall below
// Redis TIME in microseconds). Clients reconnect on their own; commands in
// flight fail.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.srv.Restart(t)
}

// Kill kills the server (SIGKILL) and waits for it: commands fail until
// Restart.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.srv.Kill(t)
}

// Pause stops the server with SIGSTOP: connections stay open but nothing
// answers, as with a hung or frozen Redis, until Resume.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.srv.Pause(t)
}

// Resume continues a paused server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	s.srv.Resume(t)
}
