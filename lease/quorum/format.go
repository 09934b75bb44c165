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
// (conn.SetNX), and is made again at a later acquisition if it failed. With
// fewer than a majority passed it fails with a *NoQuorumError ("format").
// Once every master passed, it costs one atomic load.
func (b *Backend) checkFormat(ctx context.Context) error {
	if b.formatAll.Load() {
		return nil
	}
	results := make(chan error, len(b.nodes)) // buffered: a late check never blocks
	started := 0
	for i := range b.nodes {
		if b.format[i].Passed() || !b.checking[i].CompareAndSwap(false, true) {
			continue
		}
		started++
		go func() {
			defer b.checking[i].Store(false)
			results <- b.format[i].Check(context.WithoutCancel(ctx), func(ctx context.Context) error {
				return formatver.Redis(ctx, b.nodes[i], store, b.opts.Prefix)
			})
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
		case err := <-results:
			answered++
			if errors.Is(err, fence.ErrUnknownFormat) {
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
