package redisledger

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// Claim markers spare the replicas that lose a slot's claim their tries.
// Every replica of a scheduler tries every unit due at a second's
// boundary (job x partition), and all but one find its lease held or its
// slot done: on a single server those tries were most of the Redis work of
// a slot when three replicas claim 10,000 units due together. ClaimAll
// cuts its requests into groups, and when its script has tried every unit
// of a group (taken its lease, or found it held or its slot done), the
// same script sets the group's marker, for the group's shortest lease TTL
// (5 s at most: maxMarkerTTL).
// A replica whose ClaimAll finds the marker of a group it is about to try
// answers every unit of the group as held (leasedriver.Grant with no token and
// Remaining 0, unknown) without trying them: one MGET for all the groups
// of a call, not a script's work per unit.
//
// Why this is safe and loses no slot: the marker is set only in the
// script that tried the group's units, after the tries, so it stands for
// the answers a try of each unit would have had at that moment: held (by
// the marker's setter or a third replica, which then plans the slot, as
// for any held lease) or done. A replica that skips the group acts as if
// its own tries had come at that moment, which they could have; a unit
// whose holder lost its lease within the marker's TTL is taken over at
// its next claim (the next fire, a wake-up), as when the try found the
// lease still held. The marker is a hint for efficiency only: it is never
// read by a write, the unit leases still decide who runs, and every
// ledger transition is fenced as before. A group whose script left a unit
// untried (the caller's limit) gets no marker.
//
// Groups are ledger.ClaimGroupEnds's, content-defined, so that replicas
// whose batches start at different units still cut the same groups; a
// request without a slot to begin or check (CheckOnly) is never in a
// group and ends the one before it. Its marker's key
// names the instant of its first slot and a 128-bit hash of its units'
// lease names and slots, in order: <prefix>claimed:{<unix>}:<hex>. Replicas
// whose batches hold other units, another order or other slots, compute
// other keys and try the units as before. The key's hash tag is the
// instant, so the markers of one instant are one MGET on Cluster too.
//
// On Cluster each unit is a script of its own (its keys share its own hash
// tag), so no script tries a whole group: ClaimAll reads the markers in
// the pipeline that reads the pause flags, and sets the markers of the
// groups it tried whole in one pipeline after the scripts answered
// (markTried). Set after the tries, such a marker stands for their
// answers as the script's does; it lives a round trip longer.

var _ ledger.ClaimGroupMarker = (*Ledger)(nil)

// MarksClaimGroups implements ledger.ClaimGroupMarker: true, on Cluster
// as off it.
func (l *Ledger) MarksClaimGroups() bool { return true }

// maxMarkerTTL bounds a claim marker's TTL (5 s): the time within which
// a unit whose holder lost its lease waits for its next claim (the next
// fire, a wake-up) rather than the next replica's try. The scheduler
// begins a slot in its claim only within min(interval, 5 s)
// of it, and later claims of the same fire (CheckOnly) are rare.
const maxMarkerTTL = 5 * time.Second

// claimGroupOf is a group of ClaimAll's requests: reqs[first..last].
type claimGroupOf struct {
	first, last int
	at          string // the unix second of its first slot: the key's hash tag
	key         string
	ttl         time.Duration
}

// claimGroups cuts the requests that have a slot to begin into groups (see
// above). begins reports whether a request has a slot to begin.
func (l *Ledger) claimGroups(reqs []ledger.ClaimRequest, begins func(ledger.ClaimRequest) *ledger.BeginRequest) []claimGroupOf {
	var groups []claimGroupOf
	first := -1
	h := sha256.New()
	var ttl time.Duration
	var num [binary.MaxVarintLen64]byte
	end := func(last int) {
		if first < 0 {
			return
		}
		sum := h.Sum(nil)
		at := unix(reqs[first].Begin.Slot.At)
		groups = append(groups, claimGroupOf{
			first: first, last: last, at: at, ttl: min(ttl, maxMarkerTTL),
			key: l.prefix + "claimed:{" + at + "}:" + hex.EncodeToString(sum[:16]),
		})
		first = -1
	}
	for i, r := range reqs {
		bg := begins(r)
		if bg == nil {
			end(i - 1)
			continue
		}
		if first < 0 {
			first, ttl = i, r.Lease.TTL
			h.Reset()
		}
		ttl = min(ttl, r.Lease.TTL)
		h.Write(num[:binary.PutUvarint(num[:], uint64(len(r.Lease.Name)))])
		h.Write([]byte(r.Lease.Name))
		h.Write(num[:binary.PutVarint(num[:], bg.Slot.At.Unix())])
		var next time.Time
		if i+1 < len(reqs) {
			if nb := begins(reqs[i+1]); nb != nil {
				next = nb.Slot.At
			}
		}
		if ledger.ClaimGroupEnds(r.Lease.Name, bg.Slot.At, next) {
			end(i)
		}
	}
	end(len(reqs) - 1)
	return groups
}

// markedGroups returns which of groups have their marker set (one MGET
// per instant, in one pipeline).
func (l *Ledger) markedGroups(ctx context.Context, groups []claimGroupOf) ([]bool, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	pipe := l.rdb.Pipeline()
	marked := queueMarkerReads(ctx, pipe, groups)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisledger: claim: markers: %w", err)
	}
	return marked(), nil
}

// queueMarkerReads queues on pipe the reads of groups' markers, one MGET
// per instant (the markers of one instant share a hash tag, so a Cluster
// serves each MGET from one node), and returns the function that reads,
// after the pipeline ran, which of groups are marked.
func queueMarkerReads(ctx context.Context, pipe redis.Pipeliner, groups []claimGroupOf) func() []bool {
	type read struct {
		groups []int
		cmd    *redis.SliceCmd
	}
	var reads []read
	byAt := map[string]int{}
	for g, gr := range groups {
		r, ok := byAt[gr.at]
		if !ok {
			r = len(reads)
			byAt[gr.at] = r
			reads = append(reads, read{})
		}
		reads[r].groups = append(reads[r].groups, g)
	}
	for r := range reads {
		keys := make([]string, len(reads[r].groups))
		for i, g := range reads[r].groups {
			keys[i] = groups[g].key
		}
		reads[r].cmd = pipe.MGet(ctx, keys...)
	}
	return func() []bool {
		marked := make([]bool, len(groups))
		for _, r := range reads {
			vals := r.cmd.Val()
			for i, g := range r.groups {
				marked[g] = i < len(vals) && vals[i] != nil
			}
		}
		return marked
	}
}

// markTried sets, on Cluster, the markers of the groups not marked before
// the claim (marked) whose units were all tried and answered without an
// error (out), in one pipeline after the scripts answered: a unit's
// script cannot set a marker, which is in another hash slot. Set after
// the tries, a marker stands for their answers as off Cluster, and lives
// its group's shortest lease TTL (5 s at most) from then, a round trip
// longer than the script's would. A marker that fails to be set is a
// hint lost: the other replicas try the group.
func (l *Ledger) markTried(ctx context.Context, groups []claimGroupOf, marked []bool, out []ledger.ClaimResult) {
	pipe := l.rdb.Pipeline()
	for g, gr := range groups {
		if marked[g] {
			continue
		}
		all := true
		for i := gr.first; all && i <= gr.last; i++ {
			all = out[i].Err == nil
		}
		if all {
			pipe.Set(ctx, gr.key, "1", max(gr.ttl, time.Millisecond))
		}
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx)
	}
}
