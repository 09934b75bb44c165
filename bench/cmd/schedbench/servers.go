package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is one redis-server this command started, so that INFO cpu
// counts the bench's commands only (a shared server's other clients would
// count too).
type server struct {
	addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// startServer starts a redis-server from PATH on a free loopback port,
// without persistence, with extra arguments, and waits until it answers
// PING.
func startServer(extra ...string) (*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (install it, or set REDIS_URL): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "schedbench-")
	if err != nil {
		return nil, err
	}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", ""}, extra...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for ping(s.addr) != nil {
		select {
		case <-s.done:
			s.stop()
			return nil, fmt.Errorf("redis-server on %s exited at start", s.addr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("redis-server on " + s.addr + " did not answer within 10s")
		}
	}
	return s, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

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
		return fmt.Errorf("PING: %q", line)
	}
	return nil
}

// stop kills the server and waits for it.
func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// startCluster starts a Redis Cluster of masters cluster-enabled servers
// (no replicas), the 16384 slots split evenly in order, and waits until
// every node reports cluster_state:ok and knows every other.
func startCluster(masters int) ([]*server, error) {
	var nodes []*server
	buses := make([]int, masters)
	for i := range masters {
		bus, err := freePort()
		if err != nil {
			return nodes, err
		}
		buses[i] = bus
		s, err := startServer("--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", "nodes.conf", "--cluster-announce-ip", "127.0.0.1", "--cluster-node-timeout", "5000")
		if err != nil {
			return nodes, err
		}
		nodes = append(nodes, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admins := make([]*redis.Client, masters)
	for i, n := range nodes {
		admins[i] = redis.NewClient(&redis.Options{Addr: n.addr})
		defer admins[i].Close()
		from, to := i*16384/masters, (i+1)*16384/masters-1
		if err := admins[i].Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return nodes, err
		}
		if err := admins[i].ClusterAddSlotsRange(ctx, from, to).Err(); err != nil {
			return nodes, err
		}
	}
	for i, rdb := range admins {
		for j, n := range nodes {
			if i == j {
				continue
			}
			_, port, _ := net.SplitHostPort(n.addr)
			if err := rdb.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", port, buses[j]).Err(); err != nil {
				return nodes, err
			}
		}
	}
	for _, rdb := range admins {
		for {
			info, err := rdb.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(masters)) {
				break
			}
			select {
			case <-ctx.Done():
				return nodes, fmt.Errorf("cluster not ready within 30s: %v %q", err, info)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nodes, nil
}
