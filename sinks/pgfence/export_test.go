package pgfence

import "strings"

// PruneStatements returns the two statements PruneSlotScopes runs in its
// transaction (check the cutoff and raise the watermark, delete the guard
// rows below it), so a test can run them in a transaction it holds open.
func PruneStatements(g *Guard) (raise, deleteBelow string) { return g.slot.raise, g.slot.deleteBelow }

// WithoutWatermarkLock returns a Guard like New(opts) whose slot-scoped
// checks read their unit's watermark from their snapshot alone: the
// statement that makes the watermark's row exist (and waits for a prune
// in flight) and the FOR SHARE lock are taken out, the protection against
// a PruneSlotScopes that commits after the check's snapshot, removed for
// the negative control.
func WithoutWatermarkLock(opts Options) (*Guard, error) {
	g, err := New(opts)
	if err != nil {
		return nil, err
	}
	g.slot.ensure = `SELECT $1::text, $2::text`
	g.slot.check = strings.Replace(g.slot.check, " FOR SHARE", "", 1)
	return g, nil
}
