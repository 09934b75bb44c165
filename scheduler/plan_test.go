package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// planJob registers job (defaults applied) without a Scheduler.
func planJob(t *testing.T, job Job) *registered {
	t.Helper()
	job.Name, job.Run = "p", func(context.Context, Run) error { return nil }
	job = job.withDefaults()
	sched, err := cron.Parse(job.Spec, cron.Options{Zone: job.Zone})
	require.NoError(t, err)
	return &registered{Job: job, window: newWindow(sched, job)}
}

// stepStrings renders steps as "15:04:05 run" or "15:04:05 skipped: reason".
func stepStrings(steps []step) []string {
	out := make([]string, 0, len(steps))
	for _, s := range steps {
		at := s.fire.At.UTC().Format(time.TimeOnly)
		if s.skip == "" {
			out = append(out, at+" run")
		} else {
			out = append(out, fmt.Sprintf("%s %s: %s", at, s.skip, s.reason))
		}
	}
	return out
}

// TestPlanClaim is the table of a slot's fate (plan.go): each case is one
// claim's plan from (job, ledger state, claim state, fire, now).
func TestPlanClaim(t *testing.T) {
	t.Parallel()
	at := func(hms string) time.Time {
		v, err := time.Parse(time.DateTime, "2026-03-02 "+hms)
		require.NoError(t, err)
		return v.UTC()
	}
	minutely := Job{Spec: "* * * * *"}
	fireOf := func(job *registered, hms string) cron.Fire { return job.window.fireAt(at(hms)) }
	for _, tc := range []struct {
		name    string
		job     Job
		st      ledger.State
		cs      claimState // handled nil: none
		fire    string     // "" for a wake-up
		now     string
		want    []string
		retryAt string
		paused  bool
	}{
		{name: "OnTimeFireRuns", job: minutely, st: ledger.State{Last: at("10:00:00")},
			cs: claimState{seen: at("10:00:00")}, fire: "10:01:00", now: "10:01:00.2",
			want: []string{"10:01:00 run"}},
		{name: "FirstEverClaimDoesNotBackfill", job: minutely, st: ledger.State{},
			cs: claimState{seen: at("09:00:00")}, fire: "10:01:00", now: "10:01:00.2",
			want: []string{"10:01:00 run"}},
		{name: "LateFireFollowsMissedLatestOnly", job: Job{Spec: "* * * * *", Missed: MissedLatestOnly},
			st: ledger.State{Last: at("10:00:00")}, cs: claimState{seen: at("10:00:00")}, fire: "10:03:00", now: "10:03:30",
			want: []string{"10:01:00 skipped: missed", "10:02:00 skipped: missed", "10:03:00 run"}},
		{name: "LateFireFollowsMissedSkip", job: Job{Spec: "* * * * *", Missed: MissedSkip},
			st: ledger.State{Last: at("10:00:00")}, cs: claimState{seen: at("10:00:00")}, fire: "10:02:00", now: "10:02:30",
			want: []string{"10:01:00 skipped: missed", "10:02:00 skipped: missed"}},
		{name: "OnTimeFireAfterAFreezeRunsTheSlotsBeforeAreMissed", job: Job{Spec: "* * * * * *", Missed: MissedSkip},
			st: ledger.State{Last: at("10:00:02")}, cs: claimState{seen: at("10:00:10")}, fire: "10:00:10", now: "10:00:10.5",
			want: []string{"10:00:03 skipped: missed", "10:00:04 skipped: missed", "10:00:05 skipped: missed",
				"10:00:06 skipped: missed", "10:00:07 skipped: missed", "10:00:08 skipped: missed",
				"10:00:09 skipped: missed", "10:00:10 run"}},
		{name: "RestartCatchUpKeepsTheMaxCatchUpLatest", job: Job{Spec: "* * * * *", MaxCatchUp: 2},
			st: ledger.State{Last: at("10:00:00")}, cs: claimState{seen: at("10:04:10")}, now: "10:04:10",
			want: []string{"10:01:00 skipped: missed", "10:02:00 skipped: missed", "10:03:00 run", "10:04:00 run"}},
		{name: "RestartManualAwaitsAnOperator", job: Job{Spec: "* * * * *", Missed: MissedManual},
			st: ledger.State{Last: at("10:00:00")}, cs: claimState{seen: at("10:02:10")}, now: "10:02:10",
			want: []string{"10:01:00 missed: missed: awaits an operator", "10:02:00 missed: missed: awaits an operator"}},
		{name: "SlowClaimMakesSlotsLate", job: Job{Spec: "* * * * * *", Missed: MissedLatestOnly},
			st: ledger.State{Last: at("10:00:00")}, cs: claimState{seen: at("10:00:00")}, fire: "10:00:01", now: "10:00:04.5",
			want: []string{"10:00:01 skipped: missed", "10:00:02 skipped: missed", "10:00:03 run", "10:00:04 run"}},
		{name: "OverlapForbidSkipsSlotsDueDuringARun", job: minutely,
			st: ledger.State{Last: at("10:00:00")}, cs: claimState{seen: at("10:00:00"), runFrom: at("10:00:00.1"), runTo: at("10:02:30"), handled: map[time.Time]bool{at("10:00:00"): true}},
			fire: "10:00:00", now: "10:02:30",
			want: []string{"10:01:00 skipped: overlap", "10:02:00 skipped: overlap"}},
		{name: "OverlapBufferOneRunsTheLatest", job: Job{Spec: "* * * * *", Overlap: OverlapBufferOne},
			st: ledger.State{Last: at("10:00:00")}, cs: claimState{seen: at("10:00:00"), runFrom: at("10:00:00.1"), runTo: at("10:02:30"), handled: map[time.Time]bool{at("10:00:00"): true}},
			fire: "10:00:00", now: "10:02:30",
			want: []string{"10:01:00 skipped: overlap", "10:02:00 run"}},
		{name: "OpenSlotRunsAndWaitingRetryIsLeftAlone", job: minutely,
			st: ledger.State{Last: at("10:02:00"), Open: []ledger.OpenSlot{{At: at("09:50:00")}, {At: at("10:01:00"), RetryAt: at("10:02:40")}}},
			cs: claimState{seen: at("10:02:00")}, now: "10:02:10",
			want: []string{"09:50:00 run"}, retryAt: "10:02:40"},
		{name: "PausedPlansNothing", job: minutely, st: ledger.State{Last: at("10:00:00"), Paused: true},
			cs: claimState{seen: at("10:00:00")}, fire: "10:01:00", now: "10:01:00", paused: true},
		{name: "HandledSlotsAreLeftOut", job: minutely, st: ledger.State{Last: at("10:00:00")},
			cs: claimState{seen: at("10:00:00"), handled: map[time.Time]bool{at("10:01:00"): true}}, fire: "10:01:00", now: "10:01:00"},
		{name: "OlderThanCatchUpWindowRecordedSkipped", job: Job{Spec: "* * * * *", CatchUpWindow: 2 * time.Minute, Missed: MissedLatestOnly},
			st: ledger.State{Last: at("10:00:00")}, cs: claimState{seen: at("10:05:10")}, now: "10:05:10",
			want: []string{"10:01:00 skipped: missed: older than CatchUpWindow", "10:02:00 skipped: missed: older than CatchUpWindow",
				"10:03:00 skipped: missed: older than CatchUpWindow",
				"10:04:00 skipped: missed", "10:05:00 run"}},
		{name: "HorizonBoundsTheGap", job: minutely, st: ledger.State{Last: at("10:00:00"), Horizon: at("10:03:30")},
			cs: claimState{seen: at("10:05:10")}, now: "10:05:10",
			want: []string{"10:04:00 run", "10:05:00 run"}},
		{name: "EndAtBoundsTheSlots", job: Job{Spec: "* * * * *", EndAt: at("10:02:00")}, st: ledger.State{Last: at("10:00:00")},
			cs: claimState{seen: at("10:05:10")}, now: "10:05:10",
			want: []string{"10:01:00 run"}},
		{name: "StartAtBoundsTheSlots", job: Job{Spec: "* * * * *", StartAt: at("10:03:00")}, st: ledger.State{Last: at("10:00:00")},
			cs: claimState{seen: at("10:05:10")}, now: "10:05:10",
			want: []string{"10:03:00 run", "10:04:00 run", "10:05:00 run"}},
		// Bounds off whole seconds: the slots in [StartAt, EndAt), so
		// 10:03 (before a StartAt of 10:03:00.5) is none, and 10:02 (before
		// an EndAt of 10:02:00.5) is one, caught up after a restart.
		{name: "EndAtOffASecondKeepsTheSlotBefore", job: Job{Spec: "* * * * *", EndAt: at("10:02:00.5")}, st: ledger.State{Last: at("10:00:00")},
			cs: claimState{seen: at("10:05:10")}, now: "10:05:10",
			want: []string{"10:01:00 run", "10:02:00 run"}},
		{name: "StartAtOffASecondLeavesTheSlotBefore", job: Job{Spec: "* * * * *", StartAt: at("10:03:00.5")}, st: ledger.State{Last: at("10:00:00")},
			cs: claimState{seen: at("10:05:10")}, now: "10:05:10",
			want: []string{"10:04:00 run", "10:05:00 run"}},
		{name: "BackwardStepRunsTheFireOnce", job: Job{Spec: "* * * * *", Missed: MissedSkip}, st: ledger.State{Last: at("17:00:00")},
			cs: claimState{seen: at("15:00:30")}, fire: "15:01:00", now: "15:01:00.1",
			want: []string{"15:01:00 run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			job := planJob(t, tc.job)
			cs := tc.cs
			if cs.handled == nil {
				cs.handled = map[time.Time]bool{}
			}
			var fire cron.Fire
			if tc.fire != "" {
				fire = fireOf(job, tc.fire)
			}
			p := planClaim(job, tc.st, &cs, fire, at(tc.now))
			require.Equal(t, tc.paused, p.paused)
			want := tc.want
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, stepStrings(p.steps))
			if tc.retryAt == "" {
				require.True(t, p.retryAt.IsZero(), "retryAt %v", p.retryAt)
			} else {
				require.Equal(t, at(tc.retryAt), p.retryAt)
			}
		})
	}
}

// Slots older than CatchUpWindow are recorded skipped up to maxGapRecords,
// the latest of them; the older ones are counted, for a log event.
func TestPlanClaimBoundsTheRecordedGap(t *testing.T) {
	t.Parallel()
	job := planJob(t, Job{Spec: "* * * * * *", CatchUpWindow: time.Minute})
	last := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	now := last.Add(2 * time.Hour)
	p := planClaim(job, ledger.State{Last: last}, newClaimState(now), cron.Fire{}, now)
	outside, missed := 0, 0
	for _, s := range p.steps {
		switch s.reason {
		case "missed: older than CatchUpWindow":
			outside++
		case "missed":
			missed++
		}
	}
	require.Equal(t, maxGapRecords, outside)
	require.Equal(t, 2*3600-60-1-maxGapRecords, p.unrecorded)
	require.Equal(t, last.Add(time.Second), p.first)
	require.Equal(t, now.Add(-time.Minute-time.Duration(maxGapRecords+1)*time.Second), p.last)
	require.Equal(t, 60-defaultMaxCatchUp+1, missed, "MaxCatchUp bounds the catch-up within the window")
}

func TestWindowLateAfter(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]time.Duration{
		"* * * * * *":   time.Second,
		"*/3 * * * * *": 3 * time.Second,
		"* * * * *":     maxLateness,
		"@every 2s":     2 * time.Second,
	} {
		job := planJob(t, Job{Spec: spec})
		require.Equal(t, want, job.window.lateAfter(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)), spec)
	}
}
