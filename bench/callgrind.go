package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Callgrind is a redis-server of its own under valgrind's callgrind, for
// counting the instructions the server runs for a workload (Zero, then
// Count): a figure that a busy host does not move, where the server's CPU
// time does.
type Callgrind struct {
	cmd *exec.Cmd
	dir string
	// Client is the server's client: a *redis.ClusterClient for a
	// one-master Cluster (StartCallgrind's cluster), else a *redis.Client.
	Client redis.UniversalClient
}

// CallgrindMissing names the first of the programs StartCallgrind needs
// (valgrind, callgrind_control, redis-server) that is not on PATH, or "".
func CallgrindMissing() string {
	for _, bin := range []string{"valgrind", "callgrind_control", "redis-server"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin
		}
	}
	return ""
}

// StartCallgrind starts a redis-server under callgrind on a free loopback
// port, with no persistence, and waits (a minute at most) until it
// answers; with cluster it is a Cluster of one master that serves every
// hash slot. Close stops it.
func StartCallgrind(ctx context.Context, cluster bool) (*Callgrind, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "slotir")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+filepath.Join(dir, "cg.out"),
		"redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
		"--cluster-enabled", map[bool]string{true: "yes", false: "no"}[cluster])
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Callgrind{cmd: cmd, dir: dir, Client: redis.NewClient(&redis.Options{Addr: addr})}
	// Wait for the port before the client's first dial: go-redis logs
	// refused dials.
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, errors.New("redis-server under valgrind did not listen within a minute")
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline: the server's start
	}
	if err := s.Client.Ping(ctx).Err(); err != nil {
		s.Close()
		return nil, err
	}
	if cluster {
		if err := s.Client.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
			s.Close()
			return nil, err
		}
		for s.Client.ClusterInfo(ctx).Val() == "" || !strings.Contains(s.Client.ClusterInfo(ctx).Val(), "cluster_state:ok") {
			if time.Now().After(deadline) {
				s.Close()
				return nil, errors.New("the one-master cluster did not come up within a minute")
			}
			time.Sleep(100 * time.Millisecond) // polling with a deadline
		}
		s.Client.Close()
		s.Client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	}
	return s, nil
}

// Close stops the server and removes its files.
func (s *Callgrind) Close() {
	s.Client.Close()
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	os.RemoveAll(s.dir)
}

// Zero resets the server's counts.
func (s *Callgrind) Zero() error {
	return exec.Command("callgrind_control", "-z", strconv.Itoa(s.cmd.Process.Pid)).Run()
}

// Count returns the instructions the server ran since the last Zero or
// Count.
func (s *Callgrind) Count() (int64, error) {
	before, _ := filepath.Glob(filepath.Join(s.dir, "cg.out.*"))
	if out, err := exec.Command("callgrind_control", "-d", strconv.Itoa(s.cmd.Process.Pid)).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("callgrind_control -d: %v: %s", err, out)
	}
	after, _ := filepath.Glob(filepath.Join(s.dir, "cg.out.*"))
	if len(after) != len(before)+1 {
		return 0, fmt.Errorf("callgrind wrote %d dumps, want 1", len(after)-len(before))
	}
	for _, f := range after {
		if !containsString(before, f) {
			defer os.Remove(f)
			return callgrindSummary(f)
		}
	}
	return 0, errors.New("no new dump")
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// callgrindSummary reads a callgrind dump's total instruction count.
func callgrindSummary(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "summary: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no summary line", path)
}
