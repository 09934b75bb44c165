package quorum

import (
	"context"
	"errors"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/formatver"
)

// store names the format of the keys: a quorum lease keeps the keys of
// lease/redislease (the same names, values and fence counters) on every
// master, so each master carries that store's marker.
const store = "lease/redislease"

// checkFormat checks the stored format of every master not checked yet,
// in parallel: the marker key Prefix + "format" must hold "holdfast
// lease/redislease format 1" (written there when missing). A master whose
// marker is another's refuses the acquisition with a *fence.FormatError
// (fence.ErrUnknownFormat, docs/compatibility.md), whatever the others
// say. Calls made at once share the checks: one check at a time per
// master, and until a majority has passed every call waits for it,
// whichever call started it (see startChecks). A call returns once every
// check it waits for has answered, or once a majority has passed and the
// others had StragglerWait more: a master that hangs does not hold up the
// acquisition, and its check runs on to its client's timeout, like the
// commands of a try (conn.SetNX), and is made again at a later
// acquisition if it failed; a refusal it finds after its call went on is
// the next acquisition's answer. With fewer than a majority passed it
// fails with a *NoQuorumError ("format") that joins the checks' errors.
// Once every master passed, it costs one atomic load.
func (b *Backend) checkFormat(ctx context.Context) error {
	if b.formatAll.Load() {
		return nil
	}
	// A refusal found by a check that straggled past an earlier call
	// (StragglerWait) is this call's answer: otherwise a master slower
	// than StragglerWait (a busy host) would refuse only into the void.
	for i := range b.refused {
		if p := b.refused[i].Swap(nil); p != nil {
			return *p
		}
	}
	awaited := b.startChecks(ctx)
	var straggle <-chan time.Time
	for {
		b.fmu.Lock()
		checked := b.checked
		b.fmu.Unlock()
		if err := b.refusal(awaited); err != nil {
			return err
		}
		if finished(awaited) {
			break
		}
		if straggle == nil && b.formatPassed() >= b.quorum {
			t := time.NewTimer(StragglerWait)
			defer t.Stop()
			straggle = t.C
		}
		select {
		case <-checked:
			continue
		case <-straggle:
		case <-ctx.Done():
			return ctx.Err()
		}
		// A refusal may have come with the deadline.
		if err := b.refusal(awaited); err != nil {
			return err
		}
		break
	}
	passed := b.formatPassed()
	if passed == len(b.nodes) {
		b.formatAll.Store(true)
	}
	if passed < b.quorum {
		var errs []error
		for _, c := range awaited {
			select {
			case <-c.done:
				errs = append(errs, c.err)
			default:
			}
		}
		return b.noQuorum("format", passed, passed, errors.Join(errs...))
	}
	return nil
}

// refusal returns the refusal of a finished check of awaited, nil for
// none, and takes it back from b.refused unless a later check has put
// its own there since.
func (b *Backend) refusal(awaited []*formatCheck) error {
	for _, c := range awaited {
		select {
		case <-c.done:
			if c.refusal != nil {
				b.refused[c.node].CompareAndSwap(c.refusal, nil) // answered here, not again
				return *c.refusal
			}
		default:
		}
	}
	return nil
}

// finished reports whether every check of awaited has answered.
func finished(awaited []*formatCheck) bool {
	for _, c := range awaited {
		select {
		case <-c.done:
		default:
			return false
		}
	}
	return true
}

// formatCheck is one check of one master's stored format, shared by the
// calls that wait for it.
type formatCheck struct {
	node    int
	done    chan struct{} // closed when err and refusal are set
	err     error
	refusal *error // &err when err is a refusal, as stored in b.refused
}

// startChecks returns the checks the call waits for: of every master
// whose format has not passed yet, the one in flight or one it starts.
// Once a majority has passed, a call waits only for the checks it
// starts: a master that hangs holds up one call per check (StragglerWait),
// not every call while its check runs on to its client's timeout.
func (b *Backend) startChecks(ctx context.Context) []*formatCheck {
	b.fmu.Lock()
	defer b.fmu.Unlock()
	majority := b.formatPassed() >= b.quorum
	var awaited []*formatCheck
	for i := range b.nodes {
		if b.format[i].Passed() {
			continue
		}
		c := b.checking[i]
		switch {
		case c == nil:
			c = &formatCheck{node: i, done: make(chan struct{})}
			b.checking[i] = c
			go b.check(context.WithoutCancel(ctx), c)
		case majority:
			continue
		}
		awaited = append(awaited, c)
	}
	return awaited
}

// check runs c, then wakes the calls that wait for checks.
func (b *Backend) check(ctx context.Context, c *formatCheck) {
	err := b.format[c.node].Check(ctx, func(ctx context.Context) error {
		return formatver.Redis(ctx, b.nodes[c.node], store, b.opts.Prefix)
	})
	var refusal *error
	if errors.Is(err, fence.ErrUnknownFormat) {
		refusal = &err
		b.refused[c.node].Store(refusal) // taken back by a call that sees it
	}
	b.fmu.Lock()
	defer b.fmu.Unlock()
	c.err, c.refusal = err, refusal
	close(c.done)
	b.checking[c.node] = nil
	close(b.checked)
	b.checked = make(chan struct{})
}

// formatPassed counts the masters whose stored format was checked.
func (b *Backend) formatPassed() int {
	n := 0
	for i := range b.format {
		if b.format[i].Passed() {
			n++
		}
	}
	return n
}
