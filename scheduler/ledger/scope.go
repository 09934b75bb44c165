package ledger

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrUnknownScope matches a fenced transition whose Fence.Scope names
// neither the slot's unit lease (UnitScope) nor its slot lease
// (SlotScope): the ledger has no fence of that scope for the slot and
// refuses the write, changing nothing.
var ErrUnknownScope = errors.New("ledger: fence scope is neither the slot's unit lease nor its slot lease")

// Separators of lease names. Job names and partition keys never hold
// them (the scheduler refuses them at Register), so UnitScope and
// SlotScope are injective: no (job, partition) or slot has the lease name
// of another.
const (
	// PartitionSep joins a job and a partition: "<job>|<partition>".
	PartitionSep = "|"
	// SlotSep joins a unit lease and a slot's Unix second:
	// "<unit>@<unix>".
	SlotSep = "@"
)

// Limits of the names every store keeps (one limit for every store; the
// scheduler refuses longer ones at Register).
const (
	// MaxJobNameLen is the longest job name in bytes (200).
	MaxJobNameLen = 200
	// MaxPartitionLen is the longest partition key in bytes (48).
	MaxPartitionLen = 48
)

// UnitScope is the name of the lease of one (job, partition), the scope
// of its fence: job alone for the "" partition, else "<job>|<partition>".
// Every lease holder of the pair plans and runs its slots under it
// (OverlapAllow only plans).
func UnitScope(job, partition string) string {
	if partition == "" {
		return job
	}
	return job + PartitionSep + partition
}

// SlotScope is the name of the lease of one slot under OverlapAllow,
// where runs of a (job, partition) overlap, each under its own lease:
// "<UnitScope>@<unix seconds of s.At>", e.g. "settle|eu@1780000000".
func SlotScope(s Slot) string {
	return UnitScope(s.Job, s.Partition) + SlotSep + strconv.FormatInt(s.At.Unix(), 10)
}

// SlotScoped reports which of s's fences scope names: false for the (job,
// partition)'s (UnitScope), true for the slot's own (SlotScope). Any other
// scope is an error matching ErrUnknownScope. Ledgers call it on every
// fenced transition to pick the fence they check and raise.
func SlotScoped(s Slot, scope string) (bool, error) {
	switch {
	case isUnitScope(scope, s.Job, s.Partition):
		return false, nil
	case scope == SlotScope(s):
		return true, nil
	}
	return false, fmt.Errorf("%w: %q for slot %s", ErrUnknownScope, scope, s.Key())
}

// isUnitScope reports scope == UnitScope(job, partition) without building
// the name: SlotScoped runs on every fenced transition of every slot.
func isUnitScope(scope, job, partition string) bool {
	if partition == "" {
		return scope == job
	}
	return len(scope) == len(job)+len(PartitionSep)+len(partition) &&
		strings.HasPrefix(scope, job) &&
		strings.HasPrefix(scope[len(job):], PartitionSep) &&
		strings.HasSuffix(scope, partition)
}

// Check validates f for a fenced transition of s: its scope (SlotScoped),
// and Planner, which only a slot-scoped Fence may carry, with the unit
// scope and no Planner of its own. It returns whether f is slot-scoped.
// Errors match ErrUnknownScope or ErrInvalidFence.
func (f Fence) Check(s Slot) (slotScoped bool, err error) {
	slotScoped, err = SlotScoped(s, f.Scope)
	switch {
	case err != nil:
		return false, err
	case f.Planner == nil:
		return slotScoped, nil
	case !slotScoped:
		return false, fmt.Errorf("%w: a Planner with the unit scope %q", ErrInvalidFence, f.Scope)
	case f.Planner.Planner != nil:
		return false, fmt.Errorf("%w: a Planner with a Planner of its own", ErrInvalidFence)
	case !isUnitScope(f.Planner.Scope, s.Job, s.Partition):
		return false, fmt.Errorf("%w: Planner scope %q, want the unit scope %q", ErrUnknownScope, f.Planner.Scope, UnitScope(s.Job, s.Partition))
	}
	return true, nil
}

// ErrInvalidFence matches a Fence whose parts do not fit together (see
// Fence.Check).
var ErrInvalidFence = errors.New("ledger: invalid fence")
