package redisproc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of test-owned masters with no replicas.
type Cluster struct {
	// Nodes are the masters; Nodes[i] serves the slots Slots[i].
	Nodes []*Server
	// Addrs are the masters' host:port, in the order of Nodes.
	Addrs []string
	// Slots are the inclusive slot ranges [from, to] of each node.
	Slots [][2]int
}

// StartCluster starts masters cluster-enabled redis-servers (no replicas,
// no persistence), splits the 16384 slots evenly between them in order,
// joins them, and waits until every node reports cluster_state:ok and knows
// every other. The nodes are killed when the test ends.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	bin := binary(t)
	c, err := startCluster(masters, func(build func(port int, dir string) ([]string, error)) (*Server, error) {
		n, err := launchIn(bin, t.TempDir(), "cluster node", build)
		if err == nil {
			t.Cleanup(n.stop)
		}
		return n, err
	})
	if err != nil {
		t.Fatalf("redisproc: %v", err)
	}
	return c
}

// LaunchCluster starts a Cluster as StartCluster does, for a program that
// is not a test (the bench commands), returning its errors. The caller ends
// it with Close, also after an error (c is then nil: the nodes started are
// already closed).
func LaunchCluster(masters int) (*Cluster, error) {
	bin, err := lookBinary()
	if err != nil {
		return nil, fmt.Errorf("redisproc: redis-server not found: %w", err)
	}
	var started []*Server
	c, err := startCluster(masters, func(build func(port int, dir string) ([]string, error)) (*Server, error) {
		dir, err := os.MkdirTemp("", "redisproc-")
		if err != nil {
			return nil, err
		}
		n, err := launchIn(bin, dir, "cluster node", build)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		n.ownDir = true
		started = append(started, n)
		return n, nil
	})
	if err != nil {
		for _, n := range started {
			n.Close()
		}
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	return c, nil
}

// Close kills every node and removes the directories LaunchCluster made.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}

// startCluster is StartCluster with launch starting each node.
func startCluster(masters int, launch func(build func(port int, dir string) ([]string, error)) (*Server, error)) (*Cluster, error) {
	if masters < 1 {
		return nil, fmt.Errorf("StartCluster: %d masters", masters)
	}
	c := &Cluster{}
	busPorts := make([]int, masters)
	for i := range masters {
		var busClaim *portClaim
		n, err := launch(func(port int, dir string) ([]string, error) {
			// The bus port is picked too: the default, port+10000, may
			// be taken or in the ephemeral range. It is the node's,
			// as its port is, until the node's end.
			busClaim.release() // a try before this one failed
			bus, claim, err := freePort()
			if err != nil {
				return nil, err
			}
			busPorts[i], busClaim = bus, claim
			return append(serverArgs(port, dir),
				"--cluster-enabled", "yes",
				"--cluster-port", strconv.Itoa(bus),
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-announce-ip", "127.0.0.1",
				"--cluster-node-timeout", "5000",
			), nil
		})
		if err != nil {
			busClaim.release()
			return nil, err
		}
		n.hold(busClaim)
		from := i * 16384 / masters
		to := (i+1)*16384/masters - 1
		c.Nodes = append(c.Nodes, n)
		c.Addrs = append(c.Addrs, n.Addr())
		c.Slots = append(c.Slots, [2]int{from, to})
	}

	admins := make([]*redis.Client, masters)
	for i, n := range c.Nodes {
		admins[i] = redis.NewClient(&redis.Options{Addr: n.Addr()})
		defer admins[i].Close()
	}
	ctx, cancel := adminCtx()
	defer cancel()
	for i, rdb := range admins {
		// Distinct config epochs up front, as redis-cli --cluster create
		// does, so no epoch collision has to be resolved later.
		if err := rdb.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return nil, fmt.Errorf("cluster node %s: SET-CONFIG-EPOCH: %w", c.Addrs[i], err)
		}
		if err := rdb.ClusterAddSlotsRange(ctx, c.Slots[i][0], c.Slots[i][1]).Err(); err != nil {
			return nil, fmt.Errorf("cluster node %s: ADDSLOTSRANGE: %w", c.Addrs[i], err)
		}
	}
	// Every node meets every other, so no node has to learn of the others
	// by gossip (seconds). A master still reports cluster_state:ok only
	// 2 s after it started (CLUSTER_WRITABLE_DELAY).
	for i, rdb := range admins {
		for j, n := range c.Nodes {
			if i == j {
				continue
			}
			// CLUSTER MEET ip port cluster-bus-port (Redis 7+).
			if err := rdb.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.Port(), busPorts[j]).Err(); err != nil {
				return nil, fmt.Errorf("CLUSTER MEET %s from %s: %w", n.Addr(), c.Addrs[i], err)
			}
		}
	}
	for i, rdb := range admins {
		err := waitErr(ClusterTimeout, "cluster node "+c.Addrs[i]+" ready", func() error {
			ctx, cancel := adminCtx()
			defer cancel()
			info, err := rdb.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			state := infoField(info, "cluster_state")
			known := infoField(info, "cluster_known_nodes")
			if state != "ok" || known != strconv.Itoa(masters) {
				return fmt.Errorf("cluster_state:%s cluster_known_nodes:%s", state, known)
			}
			// Every node must also route every slot to a reachable
			// address, or a client's first CLUSTER SLOTS could miss one.
			//lint:ignore SA1019 go-redis's ClusterClient routes by CLUSTER SLOTS, so that answer is the one that must be complete.
			slots, err := rdb.ClusterSlots(ctx).Result()
			if err != nil {
				return err
			}
			covered := 0
			for _, s := range slots {
				if len(s.Nodes) == 0 || !strings.Contains(s.Nodes[0].Addr, ":") {
					return fmt.Errorf("slots %d-%d: no address yet", s.Start, s.End)
				}
				covered += int(s.End - s.Start + 1)
			}
			if covered != 16384 {
				return fmt.Errorf("%d slots routed", covered)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Client returns a go-redis Cluster client of the nodes, closed when the
// test ends. configure may adjust the options before the client is made.
func (c *Cluster) Client(t testing.TB, configure ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	t.Helper()
	opts := &redis.ClusterOptions{Addrs: c.Addrs}
	for _, f := range configure {
		f(opts)
	}
	rdb := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// NodeForSlot returns the node serving slot.
func (c *Cluster) NodeForSlot(slot int) *Server {
	for i, r := range c.Slots {
		if slot >= r[0] && slot <= r[1] {
			return c.Nodes[i]
		}
	}
	return nil
}
