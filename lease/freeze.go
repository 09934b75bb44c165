package lease

import (
	"github.com/holdfast-go/holdfast/lease/internal/testhooks"
)

func init() {
	testhooks.Freeze = func(l any) { l.(*Lease).freeze() }
	testhooks.Thaw = func(l any) { l.(*Lease).thaw() }
}

// freeze stops renewals and the local expiry: the holder keeps believing
// it holds the lease while Redis lets the key expire.
func (l *Lease) freeze() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.frozen = true
}

// thaw resumes renewals and the local expiry for what is left of the trust
// window (nothing, after a long pause: the keeper ends the lease at once).
func (l *Lease) thaw() {
	l.mu.Lock()
	if l.ended || !l.frozen {
		l.mu.Unlock()
		return
	}
	l.frozen = false
	l.mu.Unlock()
	l.c.keeper.poke()
}
