package schedhttp

import (
	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// jobJSON is what GET /jobs says of one job: its registration and its
// ledger status. LagMS is the succeeded attempt's start minus its slot.
func jobJSON(info scheduler.JobInfo, st scheduler.JobStatus) JobJSON {
	j := JobJSON{Name: info.Name, Schedule: info.Spec, Zone: info.Zone, Partitions: info.Partitions,
		Overlap: info.Overlap.String(), Paused: st.Paused, NextFire: Time{info.Next}, EndAt: Time{info.EndAt}, Ended: info.Ended,
		RecentSkipped: st.Skipped, RecentFailed: st.Failed, RecentSince: Time{st.Since}}
	if j.Partitions == nil {
		j.Partitions = []string{}
	}
	if st.HasLast {
		j.LastStatus, j.LastSlot = string(st.Last.Status), Time{st.Last.Slot.At}
	}
	if st.HasSuccess {
		j.LastSuccess = Time{st.LastSuccess.Slot.At}
		if a, ok := st.LastSuccess.Latest(); ok && !a.Started.IsZero() {
			lag := a.Started.Sub(st.LastSuccess.Slot.At).Milliseconds()
			j.LagMS = &lag
		}
	}
	return j
}

func runJSON(rec ledger.Record) RunJSON {
	r := RunJSON{Job: rec.Slot.Job, Partition: rec.Slot.Partition, Slot: Time{rec.Slot.At},
		Status: string(rec.Status), Attempt: rec.Attempt, RetryAt: Time{rec.RetryAt}, Reason: rec.Reason}
	for _, a := range rec.Attempts {
		r.Attempts = append(r.Attempts, AttemptJSON{N: a.N, Token: a.Token, OwnerID: fence.OwnerID(a.Owner), Holder: a.Holder, Status: string(a.Status),
			ErrorClass: string(a.Class), Error: a.Error, Started: Time{a.Started}, Heartbeat: Time{a.Heartbeat},
			Finished: Time{a.Finished}})
	}
	return r
}

func slotJSON(s ledger.Slot) SlotJSON {
	return SlotJSON{Job: s.Job, Partition: s.Partition, Slot: Time{s.At}}
}

func leaseJSON(in leasedriver.Info) LeaseJSON {
	return LeaseJSON{Name: in.Name, Held: in.Held, OwnerID: in.OwnerID, Holder: in.Holder, TTLMS: in.TTL.Milliseconds(),
		Token: in.Token, Waiting: in.Waiting}
}
