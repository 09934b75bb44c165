package redisproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// DefaultMasterName is the name the sentinels monitor the primary under.
const DefaultMasterName = "holdfast"

// sentinelQuorum is how many sentinels must agree that the primary is down.
const sentinelQuorum = 2

// Sentinel periods in ms, set with SENTINEL DEBUG. fastPeriod is the INFO
// and hello period of every sentinel. slowPublishPeriod is the hello period
// of the sentinels that do not lead a failover, while it runs: a sentinel
// turns a replica that reports role:master back into a replica after
// 4 hello periods, and the leader notices the promotion it ordered only by
// INFO, every second (fixed). With fast hellos everywhere, a bystander would
// undo the promotion before the leader announces it.
const (
	fastPeriod        = 100
	slowPublishPeriod = 2000
)

// Sentinel is a Sentinel-managed pair: a primary, one replica, and three
// sentinels monitoring them under MasterName. Primary and Replica change
// places with each Failover. Restarting either server starts it with its
// original arguments (the first replica with --replicaof the first
// primary); the sentinels then reconfigure it.
type Sentinel struct {
	// MasterName is the name the sentinels know the primary by.
	MasterName string
	// SentinelAddrs are the sentinels' host:port.
	SentinelAddrs []string
	// Sentinels are the sentinel processes.
	Sentinels []*Server

	mu               sync.Mutex
	primary, replica *Server
}

// StartSentinel starts a primary, a replica of it, and three sentinels
// (quorum 2) with short discovery periods, and waits until the replica is
// in sync and every sentinel knows the replica and the other sentinels, so
// that Failover can start at once. Everything is killed when the test ends.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	primary := Start(t)
	replica := Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port()))
	waitReplicaOf(t, replica, primary)

	s := &Sentinel{MasterName: DefaultMasterName, primary: primary, replica: replica}
	for range 3 {
		sn := launch(t, "sentinel", func(port int, dir string) ([]string, error) {
			conf := filepath.Join(dir, "sentinel.conf")
			body := strings.Join([]string{
				"port " + strconv.Itoa(port),
				"bind 127.0.0.1",
				"daemonize no",
				"dir " + dir,
				"logfile " + filepath.Join(dir, "sentinel.log"),
				fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", s.MasterName, primary.Port(), sentinelQuorum),
				// Only SENTINEL FAILOVER moves the primary: a test that
				// pauses a server for a few seconds must not fail it over.
				"sentinel down-after-milliseconds " + s.MasterName + " 10000",
				// An aborted failover is retried after this long.
				"sentinel failover-timeout " + s.MasterName + " 5000",
				"sentinel parallel-syncs " + s.MasterName + " 1",
				"",
			}, "\n")
			// Sentinel rewrites its config file, so it must be writable.
			if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
				return nil, err
			}
			return []string{conf, "--sentinel"}, nil
		})
		s.Sentinels = append(s.Sentinels, sn)
		s.SentinelAddrs = append(s.SentinelAddrs, sn.Addr())
	}
	// The defaults (INFO every 10 s, hello every 2 s) make discovery and
	// the end of a failover take seconds; SENTINEL DEBUG (Redis 7.0+)
	// shortens them. An older sentinel is only slower.
	for _, addr := range s.SentinelAddrs {
		if err := sentinelDebug(addr, "info-period", fastPeriod, "publish-period", fastPeriod); err != nil {
			t.Logf("redisproc: SENTINEL DEBUG on %s: %v (discovery will be slower)", addr, err)
		}
	}
	s.waitSentinelsSee(t, primary, replica)
	return s
}

// Primary returns the current primary.
func (s *Sentinel) Primary() *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.primary
}

// Replica returns the current replica.
func (s *Sentinel) Replica() *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replica
}

// Client returns a go-redis failover client (it asks the sentinels for
// the primary and follows +switch-master), closed when the test ends.
// configure may adjust the options before the client is made.
func (s *Sentinel) Client(t testing.TB, configure ...func(*redis.FailoverOptions)) *redis.Client {
	t.Helper()
	opts := &redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs}
	for _, f := range configure {
		f(opts)
	}
	rdb := redis.NewFailoverClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Failover makes the sentinels promote the replica with SENTINEL FAILOVER
// (no agreement needed, the old primary keeps running) and waits until
// every sentinel reports the new primary, the new primary says
// role:master, the old one has been turned into its in-sync replica, and
// every sentinel knows it as such. Then Primary and Replica swap.
//
// Writes the old primary accepted but had not yet sent to the replica are
// lost, as in any Redis failover.
func (s *Sentinel) Failover(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	oldp, newp := s.primary, s.replica
	all := append([]*Server{oldp, newp}, s.Sentinels...)
	s.promote(t, oldp, newp, all)
	waitReplicaOf(t, oldp, newp, all...)
	s.fastHellos(t)
	s.primary, s.replica = newp, oldp
	s.waitSentinelsSee(t, newp, oldp)
}

// Promote is Failover for a primary that may be dead (Kill) or stopped
// (Pause): it makes the sentinels promote the replica and waits until
// every sentinel reports it as the primary and it says role:master, but
// not for the old primary to rejoin. Then Primary and Replica swap:
// Replica is the old primary, which a sentinel turns into a replica of
// the new one if it ever answers again.
//
// Writes the old primary accepted but had not yet sent to the replica are
// lost: with the replica stalled (Pause) before the primary is killed,
// this is how a test produces a failover that loses acknowledged writes.
func (s *Sentinel) Promote(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	oldp, newp := s.primary, s.replica
	all := append([]*Server{newp}, s.Sentinels...)
	s.promote(t, oldp, newp, all)
	s.fastHellos(t)
	s.primary, s.replica = newp, oldp
}

// promote runs SENTINEL FAILOVER until the sentinels report newp as the
// primary of oldp's name and newp says role:master. logs are the servers
// whose logs a failure shows.
func (s *Sentinel) promote(t testing.TB, oldp, newp *Server, logs []*Server) {
	t.Helper()
	// Sentinels[0] leads; the others must not undo its promotion (see
	// slowPublishPeriod) until they have heard of it.
	for _, addr := range s.SentinelAddrs[1:] {
		if err := sentinelDebug(addr, "publish-period", slowPublishPeriod); err != nil {
			t.Logf("redisproc: SENTINEL DEBUG on %s: %v", addr, err)
		}
	}
	// The leader's view decides: a failover it has not started (the replica
	// not known fresh enough: NOGOODSLAVE) or that it aborted (promotion
	// not seen within failover-timeout) is started again.
	leader := redis.NewSentinelClient(&redis.Options{Addr: s.SentinelAddrs[0]})
	defer leader.Close()
	attempts := 0
	waitFor(t, FailoverTimeout, "failover to "+newp.Addr(), func() error {
		ctx, cancel := adminCtx()
		defer cancel()
		m, err := leader.Master(ctx, s.MasterName).Result()
		if err != nil {
			return err
		}
		if m["port"] == strconv.Itoa(newp.Port()) {
			return nil
		}
		if strings.Contains(m["flags"], "failover_in_progress") {
			return fmt.Errorf("in progress: %s", m["failover-state"])
		}
		err = leader.Failover(ctx, s.MasterName).Err()
		switch {
		case err == nil:
			attempts++
			return errors.New("started")
		case strings.HasPrefix(err.Error(), "NOGOODSLAVE"), strings.HasPrefix(err.Error(), "INPROG"):
			return err
		}
		return stopPolling(err)
	}, logs...)
	if attempts > 1 {
		t.Logf("redisproc: failover from %s to %s took %d attempts", oldp.Addr(), newp.Addr(), attempts)
	}
	for _, addr := range s.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
		waitFor(t, FailoverTimeout, "sentinel "+addr+" reports the new primary", func() error {
			ctx, cancel := adminCtx()
			defer cancel()
			got, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
			if err != nil {
				return err
			}
			if len(got) != 2 || got[1] != strconv.Itoa(newp.Port()) {
				return fmt.Errorf("primary %v, want %s", got, newp.Addr())
			}
			return nil
		}, logs...)
		_ = sc.Close()
	}
	waitFor(t, FailoverTimeout, "new primary "+newp.Addr()+" says role:master", func() error {
		return checkRole(newp, "master", 0)
	}, logs...)
}

// fastHellos restores the hello period promote slowed down.
func (s *Sentinel) fastHellos(t testing.TB) {
	t.Helper()
	for _, addr := range s.SentinelAddrs[1:] {
		if err := sentinelDebug(addr, "publish-period", fastPeriod); err != nil {
			t.Logf("redisproc: SENTINEL DEBUG on %s: %v", addr, err)
		}
	}
}

// sentinelDebug runs SENTINEL DEBUG param value ... on the sentinel at addr.
func sentinelDebug(addr string, paramValues ...any) error {
	// A plain client: SentinelClient has no Do.
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx, cancel := adminCtx()
	defer cancel()
	return rdb.Do(ctx, append([]any{"SENTINEL", "DEBUG"}, paramValues...)...).Err()
}

// waitReplicaOf waits until replica replicates primary with its link up.
func waitReplicaOf(t testing.TB, replica, primary *Server, logs ...*Server) {
	t.Helper()
	waitFor(t, FailoverTimeout, replica.Addr()+" in sync with "+primary.Addr(), func() error {
		return checkRole(replica, "slave", primary.Port())
	}, append([]*Server{replica, primary}, logs...)...)
}

// checkRole checks INFO replication of srv: role, and for a replica its
// primary's port and an up link.
func checkRole(srv *Server, role string, primaryPort int) error {
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := adminCtx()
	defer cancel()
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if got := infoField(info, "role"); got != role {
		return fmt.Errorf("role:%s, want %s", got, role)
	}
	if role != "slave" {
		return nil
	}
	if got := infoField(info, "master_port"); got != strconv.Itoa(primaryPort) {
		return fmt.Errorf("master_port:%s, want %d", got, primaryPort)
	}
	if got := infoField(info, "master_link_status"); got != "up" {
		return fmt.Errorf("master_link_status:%s", got)
	}
	return nil
}

// waitSentinelsSee waits until every sentinel monitors primary, knows
// replica as a healthy replica of it, and knows the other sentinels.
func (s *Sentinel) waitSentinelsSee(t testing.TB, primary, replica *Server) {
	t.Helper()
	for _, addr := range s.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
		waitFor(t, FailoverTimeout, "sentinel "+addr+" ready", func() error {
			ctx, cancel := adminCtx()
			defer cancel()
			return s.sentinelSees(ctx, sc, primary, replica)
		}, append([]*Server{primary, replica}, s.Sentinels...)...)
		_ = sc.Close()
	}
}

func (s *Sentinel) sentinelSees(ctx context.Context, sc *redis.SentinelClient, primary, replica *Server) error {
	m, err := sc.Master(ctx, s.MasterName).Result()
	if err != nil {
		return err
	}
	if m["port"] != strconv.Itoa(primary.Port()) || m["flags"] != "master" {
		return fmt.Errorf("primary port %s flags %s, want %d master", m["port"], m["flags"], primary.Port())
	}
	replicas, err := sc.Replicas(ctx, s.MasterName).Result()
	if err != nil {
		return err
	}
	ok := false
	for _, r := range replicas {
		if r["port"] == strconv.Itoa(replica.Port()) && r["flags"] == "slave" && r["master-link-status"] == "ok" {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("replica %s not seen healthy: %v", replica.Addr(), replicas)
	}
	others, err := sc.Sentinels(ctx, s.MasterName).Result()
	if err != nil {
		return err
	}
	if len(others) != len(s.SentinelAddrs)-1 {
		return errors.New("sentinels " + strconv.Itoa(len(others)) + ", want " + strconv.Itoa(len(s.SentinelAddrs)-1))
	}
	return nil
}
