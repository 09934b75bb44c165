package quorum

import (
	"context"
	"errors"
	"sync"

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
// say. A master that does not answer is checked again at the next
// acquisition; the acquisition goes on when at least a majority has
// passed, and fails with a *NoQuorumError ("format") otherwise. Once every
// master passed, it costs one atomic load.
func (b *Backend) checkFormat(ctx context.Context) error {
	if b.formatAll.Load() {
		return nil
	}
	errs := make([]error, len(b.nodes))
	var wg sync.WaitGroup
	for i := range b.nodes {
		if b.format[i].Passed() {
			continue
		}
		wg.Go(func() {
			errs[i] = b.format[i].Check(ctx, func(ctx context.Context) error {
				return formatver.Redis(ctx, b.nodes[i], store, b.opts.Prefix)
			})
		})
	}
	wg.Wait()
	passed := 0
	for i, err := range errs {
		if errors.Is(err, fence.ErrUnknownFormat) {
			return err
		}
		if b.format[i].Passed() {
			passed++
		}
	}
	if passed == len(b.nodes) {
		b.formatAll.Store(true)
	}
	if passed < b.quorum {
		return b.noQuorum("format", passed, passed, errors.Join(errs...))
	}
	return nil
}
