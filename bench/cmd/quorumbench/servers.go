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
	"time"
)

// server is one redis-server this command started.
type server struct {
	addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// startServers starts n redis-servers from PATH on free loopback ports,
// without persistence, and waits until each answers PING. On error, the
// ones started are returned for stopServers.
func startServers(n int) ([]*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (install it, or pass -masters): %w", err)
	}
	var servers []*server
	for range n {
		s, err := startServer(bin)
		if err != nil {
			return servers, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

func startServer(bin string) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "quorumbench-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "")
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := ping(s.addr); err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			s.stop()
			return nil, fmt.Errorf("redis-server on %s exited at start", s.addr)
		case <-ctx.Done():
			s.stop()
			return nil, errors.New("redis-server on " + s.addr + " did not answer within 10s")
		case <-tick.C:
		}
	}
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

func stopServers(servers []*server) {
	for _, s := range servers {
		s.stop()
	}
}
