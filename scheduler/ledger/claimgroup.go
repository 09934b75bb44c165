package ledger

import (
	"hash/fnv"
	"time"
)

// ClaimGroupSize is the mean number of units of a claim group (16).
const ClaimGroupSize = 16

// ClaimGroupEnds reports whether a claim group ends after a unit: after
// one whose lease name hashes (FNV-1a, 32 bits) to 0 modulo
// ClaimGroupSize, and at the last unit of a slot (next is the following
// unit's slot; the zero time when there is none).
//
// Claim groups cut the units due together, in the order of their (slot,
// lease name), into runs of about ClaimGroupSize units whose boundaries
// depend on the units alone, not on where a batch starts: the scheduler
// of every replica cuts the same groups, and a LeaseJoiner that marks a
// group claimed once it tried all its units (redisledger's claim markers)
// lets the other replicas skip the group for one read. The scheduler
// claims whole groups, each replica in an order of its own, and works
// without a ledger that marks them.
func ClaimGroupEnds(lease string, slot, next time.Time) bool {
	if !next.Equal(slot) {
		return true
	}
	f := fnv.New32a()
	_, _ = f.Write([]byte(lease))
	return f.Sum32()%ClaimGroupSize == 0
}

// ClaimGroupMarker is an optional LeaseJoiner interface for a ledger whose
// ClaimAll marks the claim groups it tried whole and answers the units of
// a marked group held without trying them (redisledger, on Cluster and off
// it).
// MarksClaimGroups reports whether it does, without I/O. The scheduler
// claims in whole claim groups, each replica in a random order of its
// own, only for such a ledger; otherwise in the order its queue gives.
type ClaimGroupMarker interface {
	MarksClaimGroups() bool
}
