package scheduler

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// A ledger that joins the leases' backend (ledger.LeaseJoiner: redisledger
// over the lease Client's own Redis client) takes a batch of unit leases
// and begins their slots due on time in one call, and records a run's end
// and releases its lease in one step (run with last). The safety rules are
// the ledger's: a slot is begun only under a lease the same script took,
// fenced with the token it issued; the release is the lease's own
// compare-and-delete. A batch whose grant came back too late to be trusted
// (lease.ErrSlowAcquire) is undone as any other, but its slots were begun:
// the next claim finds them abandoned and retries them under the job's
// attempt budget, as after a crash between Begin and the run.

// joinerOf returns cfg's ledger as a LeaseJoiner when it joins the lease
// Client's backend (asked with no requests: no I/O), else nil.
func joinerOf(cfg Options) ledger.LeaseJoiner {
	j, ok := cfg.Ledger.(ledger.LeaseJoiner)
	if !ok {
		return nil
	}
	if _, err := j.ClaimAll(context.Background(), leasejoin.Backend(cfg.Leases), nil, 0, time.Time{}); err != nil {
		return nil
	}
	return j
}

// acquireAll takes at most places of the leases of chunk (names) for ttl
// and makes the fast requests of their fires: in one call of a joined
// ledger, which tries the units in order until it took places leases
// and tells of the rest which ones are held (leasedriver.ErrNotTried for the
// others); else a batch acquisition of the first places and one
// BeginIfClear call for the leases won (fastBeginAll), the rest not
// tried. pre[i] is the ledger's answer to chunk[i]'s fast request (nil:
// none made).
func (s *Scheduler) acquireAll(chunk []*entry, names []string, places int, ttl time.Duration) (leases []*lease.Lease, errs []error, pre []*ledger.BeginResult) {
	if s.joiner == nil {
		leases, errs = make([]*lease.Lease, len(chunk)), make([]error, len(chunk))
		for i := places; i < len(chunk); i++ {
			errs[i] = leasedriver.ErrNotTried
		}
		l, e := s.cfg.Leases.TryAcquireAll(s.leaseCtx(), names[:places], ttl)
		copy(leases, l)
		copy(errs, e)
		return leases, errs, s.fastBeginAll(chunk, leases)
	}
	now := s.clock.Now()
	begins := make(map[string]ledger.ClaimRequest, len(chunk))
	if s.life.claim.Err() == nil {
		for _, e := range chunk {
			if r, ok := s.fastRequest(e.u, e.req, now); ok {
				begins[e.u.lease] = ledger.ClaimRequest{Begin: &r}
			} else if r, ok := checkRequest(e.u, e.req); ok {
				begins[e.u.lease] = ledger.ClaimRequest{Begin: &r, CheckOnly: true}
			}
		}
	}
	began := make(map[string]*ledger.BeginResult, len(begins))
	acquire := func(ctx context.Context, reqs []leasedriver.AcquireRequest) ([]leasedriver.Grant, []error) {
		creqs := make([]ledger.ClaimRequest, len(reqs))
		for i, r := range reqs {
			creqs[i] = begins[r.Name]
			creqs[i].Lease = r
		}
		grants, gerrs := make([]leasedriver.Grant, len(reqs)), make([]error, len(reqs))
		res, err := s.joiner.ClaimAll(ctx, leasejoin.Backend(s.cfg.Leases), creqs, places, now)
		for i := range reqs {
			if err != nil {
				gerrs[i] = err
				continue
			}
			grants[i], gerrs[i] = res[i].Grant, res[i].Err
			if res[i].Begin != nil {
				began[reqs[i].Name] = res[i].Begin
			}
		}
		return grants, gerrs
	}
	leases, errs = leasejoin.TryAcquireAll(s.leaseCtx(), s.cfg.Leases, names, ttl, acquire)
	pre = make([]*ledger.BeginResult, len(chunk))
	for i, e := range chunk {
		if errs[i] == nil {
			pre[i] = began[e.u.lease]
		}
	}
	return leases, errs, pre
}

// checkRequest returns the CheckOnly request of req's scheduled fire for
// u, when the claim must plan it rather than begin it (fastRequest
// refused: a late fire, whose missed-slot policy decides; an unknown
// fire before it; a later slot due too): the joined claim reads the slot
// before its lease, and a replica that comes after the slot was done
// takes no lease and plans nothing. Not for OverlapAllow, whose slots run
// under leases of their own.
func checkRequest(u *unit, req claimReq) (ledger.BeginRequest, bool) {
	if !req.scheduled() || u.job.Overlap == OverlapAllow {
		return ledger.BeginRequest{}, false
	}
	return ledger.BeginRequest{Slot: ledger.Slot{Job: u.job.Name, At: req.fire.At, Partition: u.partition}}, true
}

// fastBeginAll makes the ClearBeginner requests of the fires of chunk whose
// leases were won, in one call (one round trip on the Redis ledger), and
// returns the answers by index (nil where none was asked). Once claiming
// stopped it begins nothing.
func (s *Scheduler) fastBeginAll(chunk []*entry, leases []*lease.Lease) []*ledger.BeginResult {
	pre := make([]*ledger.BeginResult, len(chunk))
	cb, ok := s.cfg.Ledger.(ledger.ClearBeginner)
	if !ok || s.life.claim.Err() != nil {
		return pre
	}
	now := s.clock.Now()
	var reqs []ledger.BeginRequest
	var at []int
	for i, e := range chunk {
		if leases[i] == nil {
			continue
		}
		if req, ok := s.fastRequest(e.u, e.req, now); ok {
			req.Fence = s.newHold(e.u, leases[i]).fence
			reqs = append(reqs, req)
			at = append(at, i)
		}
	}
	if len(reqs) == 0 {
		return pre
	}
	for j, res := range cb.BeginIfClear(s.life.run, reqs, now) {
		pre[at[j]] = &res
	}
	return pre
}
