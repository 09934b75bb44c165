package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// The ledger_reset event leaves out the times not known (a ledger that
// came back empty has no horizon and no last slot) rather than logging
// them as 0001-01-01T00:00:00Z.
func TestLedgerResetEventLeavesOutZeroTimes(t *testing.T) {
	t.Parallel()
	s := &Scheduler{}
	u := &unit{job: &registered{Job: Job{Name: "settle"}}, partition: "eu"}
	wrote := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)
	now := wrote.Add(time.Minute)
	u.mem.recorded, u.mem.sure = instantOf(wrote), instantOf(wrote)

	_, _, found := s.rememberState(u, ledger.State{}, now) // the ledger came back empty
	got := map[string]any{}
	for _, a := range found {
		got[a.Key] = a.Value.Any()
	}
	require.Equal(t, map[string]any{"job": "settle", "partition": "eu", "last_recorded": wrote, "after": wrote, "until": now}, got)
}
