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
// master, and every call waits for it, whichever call started it. A call
// returns once every check it waits for has answered, or once a majority
// has passed and the others had StragglerWait more: a master that hangs
// does not hold up the acquisition, and its check runs on to its client's
// timeout, like the commands of a try (conn.SetNX), and is made again at a
// later acquisition if it failed; a refusal it finds after its call went
// on is the next acquisition's answer. With fewer than a majority passed
// it fails with a *NoQuorumError ("format") that joins the checks'
// errors. Once every master passed, it costs one atomic load.
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
		pending := 0
		for _, c := range awaited {
			select {
			case <-c.done:
				if errors.Is(c.err, fence.ErrUnknownFormat) {
					b.refused[c.node].Store(nil) // answered here, not again
					return c.err
				}
			default:
				pending++
			}
		}
		if pending == 0 {
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

// formatCheck is one check of one master's stored format, shared by the
// calls that wait for it.
type formatCheck struct {
	node int
	done chan struct{} // closed when err is set
	err  error
}

// startChecks returns the check of every master whose format has not
// passed yet: the one in flight, or one it starts.
func (b *Backend) startChecks(ctx context.Context) []*formatCheck {
	b.fmu.Lock()
	defer b.fmu.Unlock()
	var awaited []*formatCheck
	for i := range b.nodes {
		if b.format[i].Passed() {
			continue
		}
		c := b.checking[i]
		if c == nil {
			c = &formatCheck{node: i, done: make(chan struct{})}
			b.checking[i] = c
			go b.check(context.WithoutCancel(ctx), c)
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
	if errors.Is(err, fence.ErrUnknownFormat) {
		b.refused[c.node].Store(&err) // taken back by a call that sees it
	}
	b.fmu.Lock()
	defer b.fmu.Unlock()
	c.err = err
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
