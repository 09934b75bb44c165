package schedprom_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/schedprom"
)

// A ledger reset a replica finds (scheduler.Observer.LedgerReset) shows in
// job_ledger_reset_total{job}, the metric the HoldfastLedgerReset alert
// reads.
func TestObserverCountsLedgerResets(t *testing.T) {
	t.Parallel()
	obs, err := schedprom.New(schedprom.Options{})
	require.NoError(t, err)
	var ro scheduler.Observer = obs
	ro.LedgerReset("settle")
	ro.LedgerReset("settle")
	ro.LedgerReset("report")
	require.Equal(t, 2.0, value(t, obs, "holdfast_job_ledger_reset_total", map[string]string{"job": "settle"}))
	require.Equal(t, 1.0, value(t, obs, "holdfast_job_ledger_reset_total", map[string]string{"job": "report"}))
}
