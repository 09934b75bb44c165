// Package faultproxy is a TCP proxy on loopback that injects network faults
// between a client and a test-owned server: latency per direction, a stall
// (bytes held until Resume), and connection resets. Tests put it in front of
// a redis-server or PostgreSQL to produce a slow reply, a hung server or a
// reset after commit for real, on the client's own sockets.
//
// # Model
//
// Every accepted connection is forwarded to the target by two pumps, one
// per direction. A pump reads a chunk, stamps it with the time it was read,
// and writes it out no earlier than stamp + the direction's delay, waiting
// meanwhile while the proxy is stalled. Chunks keep their order, so a delay
// shifts a stream in time without reordering it; changing the delay applies
// to chunks read after the change.
//
// # Loopback only
//
// New refuses a target that is not a loopback address, and the proxy
// listens on 127.0.0.1 only: these faults are for the machine's own test
// servers, never for another host.
//
// # Goroutines
//
// The proxy owns one accept goroutine and two pumps per connection. Close
// stops accepting, closes every connection and waits for all of them.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direction names the side of a connection a fault applies to.
type Direction int

const (
	// Upstream is client -> server (requests).
	Upstream Direction = iota
	// Downstream is server -> client (replies).
	Downstream
)

// ErrNotLoopback is returned by New for a target that is not on loopback.
var ErrNotLoopback = errors.New("faultproxy: target is not a loopback address")

// Proxy forwards TCP connections from Addr to a target, with faults.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	delay   [2]time.Duration
	stalled chan struct{} // non-nil while stalled; closed by Resume
	conns   map[*link]struct{}
	closed  bool
	stop    chan struct{} // closed by Close

	wg sync.WaitGroup

	received [2]atomic.Int64 // bytes read per direction
}

type link struct {
	client, server net.Conn
}

// New starts a proxy on 127.0.0.1 (a free port) forwarding to target
// ("host:port", host a loopback IP or "localhost"). It returns
// ErrNotLoopback for any other host.
func New(target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	if host != "localhost" {
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("%w: %q", ErrNotLoopback, target)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[*link]struct{}{}, stop: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address ("127.0.0.1:port"): point the
// client here.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay makes every chunk read after the call in direction dir wait d
// before it is written on (0 removes the delay).
func (p *Proxy) SetDelay(dir Direction, d time.Duration) {
	p.mu.Lock()
	p.delay[dir] = d
	p.mu.Unlock()
}

// Stall holds every byte in both directions, on open and new connections,
// until Resume: a server that accepts but never answers. Stalling a stalled
// proxy does nothing.
func (p *Proxy) Stall() {
	p.mu.Lock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
	p.mu.Unlock()
}

// Resume lets held bytes through, in order. Resuming a proxy that is not
// stalled does nothing.
func (p *Proxy) Resume() {
	p.mu.Lock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
	p.mu.Unlock()
}

// Reset closes every open connection with a TCP RST (SO_LINGER 0) on the
// client side and a close on the server side; bytes in flight are lost.
// New connections are accepted as before. It returns how many connections
// it reset.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.reset()
	}
	return len(links)
}

// Received reports how many bytes the proxy has read so far in direction
// dir, over every connection: read, not necessarily written on yet. A test
// waits for it to grow to know that a request reached the proxy (and got
// the delay in force then), before it changes the delay for what follows.
func (p *Proxy) Received(dir Direction) int64 { return p.received[dir].Load() }

// Conns reports how many connections are open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops the proxy: no new connection, every open one closed, and
// every goroutine returned. Safe to call twice.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.stop)
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.reset()
			return
		}
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		var pumps sync.WaitGroup
		pumps.Add(2)
		p.wg.Add(1)
		go func() { defer pumps.Done(); l.ended(s, p.pump(Upstream, s, c)) }()
		go func() { defer pumps.Done(); l.ended(c, p.pump(Downstream, c, s)) }()
		go func() {
			defer p.wg.Done()
			pumps.Wait()
			l.close()
			p.mu.Lock()
			delete(p.conns, l)
			p.mu.Unlock()
		}()
	}
}

// pump copies src to dst, holding each chunk until its due time and while
// the proxy is stalled. It returns io.EOF when src ended cleanly.
func (p *Proxy) pump(dir Direction, dst io.Writer, src io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			read := time.Now()
			p.received[dir].Add(int64(n))
			if !p.hold(dir, read) {
				return net.ErrClosed
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}

// hold waits until a chunk read at read may go out. It returns false when
// the proxy closed meanwhile.
func (p *Proxy) hold(dir Direction, read time.Time) bool {
	for {
		p.mu.Lock()
		delay, stalled := p.delay[dir], p.stalled
		p.mu.Unlock()
		if stalled != nil {
			select {
			case <-stalled:
				continue // the delay may have changed meanwhile
			case <-p.stop:
				return false
			}
		}
		wait := time.Until(read.Add(delay))
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			// Check the stall again before writing.
			p.mu.Lock()
			stalled = p.stalled
			p.mu.Unlock()
			if stalled == nil {
				return true
			}
		case <-p.stop:
			t.Stop()
			return false
		}
	}
}

func (l *link) reset() {
	if tc, ok := l.client.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	l.close()
}

func (l *link) close() {
	_ = l.client.Close()
	_ = l.server.Close()
}

// ended is called when the pump writing to dst returned err: a clean EOF
// is passed on (the peer is done writing, the other direction goes on);
// anything else closes the whole link, so the other pump returns too.
func (l *link) ended(dst net.Conn, err error) {
	if errors.Is(err, io.EOF) {
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
			return
		}
	}
	l.close()
}
