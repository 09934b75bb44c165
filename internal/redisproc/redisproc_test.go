package redisproc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
)

func TestStartServesAnEmptyServerWithoutPersistence(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t, "--maxmemory", "64mb")
	rdb := srv.Client(t)
	ctx := context.Background()

	host, _, err := net.SplitHostPort(srv.Addr())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	n, err := rdb.DBSize(ctx).Result()
	require.NoError(t, err)
	require.Zero(t, n)
	for param, want := range map[string]string{
		"save": "", "appendonly": "no", "bind": "127.0.0.1",
		"dir": srv.Dir(), "maxmemory": fmt.Sprint(64 << 20),
	} {
		got, err := rdb.ConfigGet(ctx, param).Result()
		require.NoError(t, err)
		require.Equal(t, want, got[param], "CONFIG GET %s", param)
	}
}

func TestCleanupKillsTheProcess(t *testing.T) {
	t.Parallel()
	var addr string
	t.Run("owner", func(t *testing.T) {
		addr = redisproc.Start(t).Addr()
		requirePing(t, addr)
	})
	requireNoAnswer(t, addr)
}

func TestKillStopsTheServer(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t)
	srv.Kill(t)
	requireNoAnswer(t, srv.Addr())
	srv.Kill(t) // a second Kill does nothing
}

func TestRestartComesBackEmptyOnTheSamePort(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, rdb.ScriptLoad(ctx, "return 1").Err())
	addr := srv.Addr()

	srv.Restart(t)
	require.Equal(t, addr, srv.Addr())
	// The pooled connection died with the old process; go-redis retries
	// the command on a new one.
	_, err := rdb.Get(ctx, "k").Result()
	require.ErrorIs(t, err, redis.Nil, "a restart without persistence loses the data")
	exists, err := rdb.ScriptExists(ctx, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db").Result()
	require.NoError(t, err)
	require.Equal(t, []bool{false}, exists, "and the script cache")

	srv.Kill(t)
	srv.Restart(t) // a killed server starts again too
	require.NoError(t, rdb.Ping(ctx).Err())
}

func TestPauseMakesCommandsTimeOutUntilResume(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t)
	rdb := srv.Client(t, func(o *redis.Options) {
		o.ReadTimeout = 200 * time.Millisecond
		o.MaxRetries = -1
	})
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())

	srv.Pause(t)
	start := time.Now()
	err := rdb.Get(ctx, "k").Err()
	var nerr net.Error
	require.ErrorAs(t, err, &nerr)
	require.True(t, nerr.Timeout(), "want a timeout, got %v", err)
	require.Less(t, time.Since(start), 2*time.Second)

	srv.Resume(t)
	got, err := rdb.Get(ctx, "k").Result()
	require.NoError(t, err)
	require.Equal(t, "v", got, "a paused server keeps its data")
}

func TestClusterServesEverySlot(t *testing.T) {
	t.Parallel()
	c := redisproc.StartCluster(t, 3)
	require.Len(t, c.Addrs, 3)
	ctx := context.Background()
	for _, n := range c.Nodes {
		info, err := n.Client(t).ClusterInfo(ctx).Result()
		require.NoError(t, err)
		require.Contains(t, info, "cluster_state:ok")
		require.Contains(t, info, "cluster_slots_assigned:16384")
	}

	rdb := c.Client(t)
	for i := range 60 {
		require.NoError(t, rdb.Set(ctx, fmt.Sprint("key-", i), i, 0).Err())
	}
	for i, n := range c.Nodes {
		size, err := n.Client(t).DBSize(ctx).Result()
		require.NoError(t, err)
		require.NotZero(t, size, "node %d holds some keys", i)
	}
	slot, err := rdb.ClusterKeySlot(ctx, "key-0").Result()
	require.NoError(t, err)
	owner := c.NodeForSlot(int(slot))
	require.NotNil(t, owner)
	got, err := owner.Client(t).Get(ctx, "key-0").Result()
	require.NoError(t, err)
	require.Equal(t, "0", got, "NodeForSlot names the node holding the key")
}

func TestSentinelFailoverChangesThePrimary(t *testing.T) {
	t.Parallel()
	s := redisproc.StartSentinel(t)
	require.Len(t, s.SentinelAddrs, 3)
	ctx := context.Background()
	oldPrimary, oldReplica := s.Primary(), s.Replica()
	rdb := s.Client(t)
	require.NoError(t, rdb.Set(ctx, "before", "1", 0).Err())
	// Make sure the write reached the replica before it is promoted.
	require.NoError(t, rdb.Do(ctx, "WAIT", 1, 5000).Err())

	start := time.Now()
	s.Failover(t)
	t.Logf("failover took %v", time.Since(start))
	require.Same(t, oldReplica, s.Primary())
	require.Same(t, oldPrimary, s.Replica())

	got, err := rdb.Get(ctx, "before").Result()
	require.NoError(t, err)
	require.Equal(t, "1", got)
	require.NoError(t, rdb.Set(ctx, "after", "2", 0).Err())
	got, err = s.Primary().Client(t).Get(ctx, "after").Result()
	require.NoError(t, err)
	require.Equal(t, "2", got, "the failover client writes to the new primary")
	err = s.Replica().Client(t).Set(ctx, "x", "y", 0).Err()
	require.True(t, redis.IsReadOnlyError(err), "the old primary is a replica now: %v", err)

	s.Failover(t) // and back
	require.Same(t, oldPrimary, s.Primary())
	require.NoError(t, rdb.Set(ctx, "back", "3", 0).Err())
	got, err = oldPrimary.Client(t).Get(ctx, "back").Result()
	require.NoError(t, err)
	require.Equal(t, "3", got)
}

func requirePing(t *testing.T, addr string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	require.NoError(t, rdb.Ping(context.Background()).Err())
}

func requireNoAnswer(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = conn.Close()
	}
	var op *net.OpError
	require.True(t, errors.As(err, &op), "nothing must listen on %s, dial: %v", addr, err)
}

// Launch and LaunchCluster serve programs that are not tests (the bench
// commands): Close kills the processes and removes their directories.
func TestLaunchServesUntilCloseRemovesItsDirectory(t *testing.T) {
	t.Parallel()
	redisproc.Start(t) // skips like every test here when redis-server is missing
	srv, err := redisproc.Launch("--maxmemory", "64mb")
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())
	got, err := rdb.ConfigGet(ctx, "maxmemory").Result()
	require.NoError(t, err)
	require.Equal(t, "67108864", got["maxmemory"])
	require.DirExists(t, srv.Dir())

	srv.Close()
	require.NoDirExists(t, srv.Dir())
	_, err = net.DialTimeout("tcp", srv.Addr(), time.Second)
	require.Error(t, err)
	srv.Close() // twice is fine
}

func TestLaunchClusterServesEverySlotUntilClose(t *testing.T) {
	t.Parallel()
	redisproc.Start(t)
	c, err := redisproc.LaunchCluster(2)
	require.NoError(t, err)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	defer rdb.Close()
	ctx := context.Background()
	for i := range 20 {
		require.NoError(t, rdb.Set(ctx, fmt.Sprint("k", i), i, 0).Err())
	}
	c.Close()
	for _, n := range c.Nodes {
		require.NoDirExists(t, n.Dir())
	}
	_, err = redisproc.LaunchCluster(0)
	require.Error(t, err)
}
