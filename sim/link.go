package sim

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errLink is what a call that the simulated network lost, or a crashed
// replica's call, returns: a network error, retryable.
var errLink = errors.New("sim: connection lost")

// linkMode is the state of one replica's link to one store, set by the
// driver at fixed simulated instants (faults.go) and read by every call.
type linkMode struct {
	delay     time.Duration // added before the request reaches the store
	dropReq   bool          // the request is lost: the store never sees it
	dropReply bool          // the store acts, the reply is lost
}

// proc is one replica's process state, shared by its links: paused
// (every call and the job's work wait until resumed, as a frozen process)
// or crashed (every call fails at once).
type proc struct {
	mu      sync.Mutex
	gate    chan struct{} // closed while running; open while paused
	crashed bool
	links   map[string]linkMode // by store: "lease", "ledger", "sink"
}

func newProc() *proc {
	g := make(chan struct{})
	close(g)
	return &proc{gate: g, links: map[string]linkMode{}}
}

// pause freezes the replica until resume.
func (p *proc) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// resume ends a pause.
func (p *proc) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

func (p *proc) setCrashed(c bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.crashed = c
}

func (p *proc) setLink(store string, m linkMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.links[store] = m
}

// healAll resumes the replica and clears every link fault.
func (p *proc) healAll() {
	p.resume()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.links = map[string]linkMode{}
}

// wait blocks while the replica is paused (ignoring ctx: a frozen process
// does not look at its contexts) and reports whether it has crashed.
func (p *proc) wait() error {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	<-g
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.crashed {
		return errLink
	}
	return nil
}

// call runs op over the replica's link to store: it waits out a pause,
// fails for a crashed replica, waits the link's delay (bounded by ctx),
// drops the request or the reply as the link's mode says. op's own error
// is returned when the reply arrives.
func (p *proc) call(ctx context.Context, store string, op func() error) error {
	if err := p.wait(); err != nil {
		return err
	}
	p.mu.Lock()
	m := p.links[store]
	p.mu.Unlock()
	if m.delay > 0 {
		t := time.NewTimer(m.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
	}
	if m.dropReq {
		return errLink
	}
	err := op()
	if m.dropReply {
		return errLink
	}
	// A pause that began while the call was in flight holds the reply.
	if werr := p.wait(); werr != nil {
		return werr
	}
	return err
}
