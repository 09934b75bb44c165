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
// say. It returns once every check started has answered, or once a
// majority has passed and the others had StragglerWait more: a master that
// hangs does not hold up the acquisition, and its check (one at a time per
// master) runs on to its client's timeout, like the commands of a try
// (conn.SetNX), and is made again at a later acquisition if it failed; a
// refusal it finds after its call went on is the next acquisition's answer. With
// fewer than a majority passed it fails with a *NoQuorumError ("format").
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
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(b.nodes)) // buffered: a late check never blocks
	started := 0
	for i := range b.nodes {
		if b.format[i].Passed() || !b.checking[i].CompareAndSwap(false, true) {
			continue
		}
		started++
		go func() {
			defer b.checking[i].Store(false)
			err := b.format[i].Check(context.WithoutCancel(ctx), func(ctx context.Context) error {
				return formatver.Redis(ctx, b.nodes[i], store, b.opts.Prefix)
			})
			if errors.Is(err, fence.ErrUnknownFormat) {
				b.refused[i].Store(&err) // taken back below if this call sees it
			}
			results <- result{i, err}
		}()
	}
	var (
		errs     []error
		straggle <-chan time.Time
	)
	for answered := 0; answered < started; {
		if straggle == nil && b.formatPassed() >= b.quorum {
			t := time.NewTimer(StragglerWait)
			defer t.Stop()
			straggle = t.C
		}
		select {
		case r := <-results:
			answered++
			err := r.err
			if errors.Is(err, fence.ErrUnknownFormat) {
				b.refused[r.i].Store(nil) // answered here, not again
				return err
			}
			if err != nil {
				errs = append(errs, err)
			}
		case <-straggle:
			answered = started
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	passed := b.formatPassed()
	if passed == len(b.nodes) {
		b.formatAll.Store(true)
	}
	if passed < b.quorum {
		return b.noQuorum("format", passed, passed, errors.Join(errs...))
	}
	return nil
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
