package bench

import (
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"time"
)

// LatencyProxy is a loopback TCP proxy that delivers every chunk it reads
// OneWay after it read it, in each direction, without holding back the
// chunks behind it: a delay line, as a network between two hosts is (the
// leasebench regime "latency250_": 125 µs each way, a 250 µs round trip).
// Unlike internal/faultproxy's delay, which writes a chunk before it reads
// the next, a pipelined client is not serialised by it.
type LatencyProxy struct {
	oneWay time.Duration
	target string
	ln     net.Listener

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// NewLatencyProxy listens on 127.0.0.1 (a free port) and forwards to
// target, a loopback address, with oneWay (> 0) added to each direction.
// Close stops it.
func NewLatencyProxy(target string, oneWay time.Duration) (*LatencyProxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, errors.New("bench: latency proxy: target must be a loopback address")
	}
	if oneWay <= 0 {
		return nil, errors.New("bench: latency proxy: oneWay must be positive")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &LatencyProxy{oneWay: oneWay, target: target, ln: ln}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address ("127.0.0.1:port").
func (p *LatencyProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *LatencyProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *LatencyProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.line(server, client)
		go p.line(client, server)
	}
}

// chunk is bytes read at a time, due at at + oneWay.
type chunk struct {
	b  []byte
	at time.Time
}

// line copies src to dst through the delay line: a reader that stamps
// each chunk and a writer that sends it when due. When either side ends,
// both connections are closed.
func (p *LatencyProxy) line(dst, src net.Conn) {
	defer p.wg.Done()
	q := make(chan chunk, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			waitUntil(c.at.Add(p.oneWay))
			if _, err := dst.Write(c.b); err != nil {
				_ = src.Close()
				for range q { // drain until the reader stops
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now()}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			break
		}
	}
	close(q)
	<-done
	_ = dst.Close()
}

// waitUntil returns at due (the delay line's latency itself, not a wait
// for an event). Go's timers round a sleep under a millisecond up to about
// one when the runtime parks in the network poller (golang/go#44343), so
// the last millisecond is spun, yielding the processor between looks.
func waitUntil(due time.Time) {
	if wait := time.Until(due) - time.Millisecond; wait > 0 {
		time.Sleep(wait)
	}
	for time.Now().Before(due) {
		runtime.Gosched()
	}
}
