package cron_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/cron"
)

// The 2026 transitions these tables are written against, as printed by
// `zdump -v -c 2026,2027 <zone>` (cross-checked by hand against the rules):
//
//	America/New_York     03-08 07:00Z EST-5 -> EDT-4    11-01 06:00Z EDT-4 -> EST-5
//	Europe/Berlin        03-29 01:00Z CET+1 -> CEST+2   10-25 01:00Z CEST+2 -> CET+1
//	Australia/Lord_Howe  04-04 15:00Z +11 -> +10:30     10-03 15:30Z +10:30 -> +11
//	America/Havana       03-08 05:00Z CST-5 -> CDT-4    11-01 05:00Z CDT-4 -> CST-5
//	                     (spring forward at local midnight: 03-08 00:00-00:59 do not exist)
//	Asia/Seoul, UTC      no transitions
//
// Every expected fire is "<At UTC> <rule> <business date>" and was derived
// from those rules by hand, never by running the code under test.

type dstCase struct {
	name     string
	zone     string
	spec     string
	opts     cron.Options // Zone is filled from zone
	from, to string       // window (from, to], UTC
	want     []string
}

func fireStrings(fires []cron.Fire) []string {
	out := make([]string, 0, len(fires))
	for _, f := range fires {
		out = append(out, fmt.Sprintf("%s %s %s", f.At.Format(time.RFC3339), f.Rule, f.BusinessDate))
	}
	return out
}

func runDSTCases(t *testing.T, cases []dstCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := tc.opts
			opts.Zone = tc.zone
			s, err := cron.Parse(tc.spec, opts)
			require.NoError(t, err)
			fires := s.Between(utc(t, tc.from), utc(t, tc.to), 100)
			require.Equal(t, tc.want, fireStrings(fires))

			// Next agrees with Between, fire by fire, and every fire is
			// consistent with itself.
			at := utc(t, tc.from)
			for _, f := range fires {
				n, ok := s.Next(at)
				require.True(t, ok)
				require.Equal(t, f, n)
				require.Equal(t, time.UTC, f.At.Location())
				require.True(t, f.Local.Equal(f.At))
				require.Equal(t, s.Zone(), f.Local.Location())
				at = f.At
			}
		})
	}
}

const (
	ny      = "America/New_York"
	berlin  = "Europe/Berlin"
	lhi     = "Australia/Lord_Howe"
	havana  = "America/Havana"
	seoul   = "Asia/Seoul"
	utcZone = "UTC"
)

var (
	gapSkip  = cron.Options{Gap: cron.GapSkip}
	foldBoth = cron.Options{Fold: cron.FoldBoth}
)

func TestDSTNewYork(t *testing.T) {
	t.Parallel()
	runDSTCases(t, []dstCase{
		// Spring forward 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z).
		{"Spring/FixedInGapRunsAtTransition", ny, "30 2 * * *", cron.Options{}, "2026-03-08T04:00:00Z", "2026-03-09T08:00:00Z", []string{
			"2026-03-08T07:00:00Z gap-run-after 2026-03-08",
			"2026-03-09T06:30:00Z normal 2026-03-09",
		}},
		{"Spring/FixedInGapSkipped", ny, "30 2 * * *", gapSkip, "2026-03-08T04:00:00Z", "2026-03-09T08:00:00Z", []string{
			"2026-03-09T06:30:00Z normal 2026-03-09",
		}},
		{"Spring/Midnight", ny, "0 0 * * *", cron.Options{}, "2026-03-08T04:00:00Z", "2026-03-09T08:00:00Z", []string{
			"2026-03-08T05:00:00Z normal 2026-03-08",
			"2026-03-09T04:00:00Z normal 2026-03-09",
		}},
		{"Spring/BeforeGap", ny, "30 1 * * *", cron.Options{}, "2026-03-08T04:00:00Z", "2026-03-09T08:00:00Z", []string{
			"2026-03-08T06:30:00Z normal 2026-03-08",
			"2026-03-09T05:30:00Z normal 2026-03-09",
		}},
		{"Spring/RangeCoalescesGapWithFirstHourAfter", ny, "0 1-3 * * *", cron.Options{}, "2026-03-08T04:00:00Z", "2026-03-09T08:00:00Z", []string{
			"2026-03-08T06:00:00Z normal 2026-03-08",
			"2026-03-08T07:00:00Z gap-run-after 2026-03-08",
			"2026-03-09T05:00:00Z normal 2026-03-09",
			"2026-03-09T06:00:00Z normal 2026-03-09",
			"2026-03-09T07:00:00Z normal 2026-03-09",
		}},
		{"Spring/RangeGapSkipKeepsHourAfter", ny, "0 1-3 * * *", gapSkip, "2026-03-08T04:00:00Z", "2026-03-08T08:00:00Z", []string{
			"2026-03-08T06:00:00Z normal 2026-03-08",
			"2026-03-08T07:00:00Z normal 2026-03-08",
		}},
		{"Spring/SeveralGapTimesCoalesce", ny, "0,15,30,45 2 * * *", cron.Options{}, "2026-03-08T04:00:00Z", "2026-03-08T12:00:00Z", []string{
			"2026-03-08T07:00:00Z gap-run-after 2026-03-08",
		}},
		{"Spring/SteppedHourIsWildcard", ny, "0 */2 * * *", cron.Options{}, "2026-03-08T04:00:00Z", "2026-03-08T12:00:00Z", []string{
			"2026-03-08T05:00:00Z normal 2026-03-08",
			"2026-03-08T08:00:00Z normal 2026-03-08",
			"2026-03-08T10:00:00Z normal 2026-03-08",
			"2026-03-08T12:00:00Z normal 2026-03-08",
		}},
		{"Spring/WildcardSkipsGap", ny, "*/30 * * * *", cron.Options{}, "2026-03-08T06:00:00Z", "2026-03-08T08:00:00Z", []string{
			"2026-03-08T06:30:00Z normal 2026-03-08",
			"2026-03-08T07:00:00Z normal 2026-03-08",
			"2026-03-08T07:30:00Z normal 2026-03-08",
			"2026-03-08T08:00:00Z normal 2026-03-08",
		}},
		{"Spring/SecondsFieldInGap", ny, "15 30 2 * * *", cron.Options{}, "2026-03-08T04:00:00Z", "2026-03-09T08:00:00Z", []string{
			"2026-03-08T07:00:00Z gap-run-after 2026-03-08",
			"2026-03-09T06:30:15Z normal 2026-03-09",
		}},

		// Fall back 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z).
		{"Fall/AfterFold", ny, "30 2 * * *", cron.Options{}, "2026-11-01T03:00:00Z", "2026-11-02T08:00:00Z", []string{
			"2026-11-01T07:30:00Z normal 2026-11-01",
			"2026-11-02T07:30:00Z normal 2026-11-02",
		}},
		{"Fall/Midnight", ny, "0 0 * * *", cron.Options{}, "2026-11-01T03:00:00Z", "2026-11-02T08:00:00Z", []string{
			"2026-11-01T04:00:00Z normal 2026-11-01",
			"2026-11-02T05:00:00Z normal 2026-11-02",
		}},
		{"Fall/FixedInFoldRunsOnce", ny, "30 1 * * *", cron.Options{}, "2026-11-01T03:00:00Z", "2026-11-02T08:00:00Z", []string{
			"2026-11-01T05:30:00Z fold-first 2026-11-01",
			"2026-11-02T06:30:00Z normal 2026-11-02",
		}},
		{"Fall/FixedInFoldBoth", ny, "30 1 * * *", foldBoth, "2026-11-01T03:00:00Z", "2026-11-02T08:00:00Z", []string{
			"2026-11-01T05:30:00Z fold-first 2026-11-01",
			"2026-11-01T06:30:00Z fold-second 2026-11-01",
			"2026-11-02T06:30:00Z normal 2026-11-02",
		}},
		{"Fall/Range", ny, "0 1-3 * * *", cron.Options{}, "2026-11-01T03:00:00Z", "2026-11-02T08:00:00Z", []string{
			"2026-11-01T05:00:00Z fold-first 2026-11-01",
			"2026-11-01T07:00:00Z normal 2026-11-01",
			"2026-11-01T08:00:00Z normal 2026-11-01",
			"2026-11-02T06:00:00Z normal 2026-11-02",
			"2026-11-02T07:00:00Z normal 2026-11-02",
			"2026-11-02T08:00:00Z normal 2026-11-02",
		}},
		{"Fall/RangeFoldBoth", ny, "0 1-3 * * *", foldBoth, "2026-11-01T03:00:00Z", "2026-11-01T09:00:00Z", []string{
			"2026-11-01T05:00:00Z fold-first 2026-11-01",
			"2026-11-01T06:00:00Z fold-second 2026-11-01",
			"2026-11-01T07:00:00Z normal 2026-11-01",
			"2026-11-01T08:00:00Z normal 2026-11-01",
		}},
		{"Fall/SteppedHourIsWildcard", ny, "0 */2 * * *", cron.Options{}, "2026-11-01T03:00:00Z", "2026-11-01T09:00:00Z", []string{
			"2026-11-01T04:00:00Z normal 2026-11-01",
			"2026-11-01T07:00:00Z normal 2026-11-01",
			"2026-11-01T09:00:00Z normal 2026-11-01",
		}},
		{"Fall/WildcardRunsBothPasses", ny, "*/30 * * * *", cron.Options{}, "2026-11-01T04:00:00Z", "2026-11-01T07:00:00Z", []string{
			"2026-11-01T04:30:00Z normal 2026-11-01",
			"2026-11-01T05:00:00Z fold-first 2026-11-01",
			"2026-11-01T05:30:00Z fold-first 2026-11-01",
			"2026-11-01T06:00:00Z fold-second 2026-11-01",
			"2026-11-01T06:30:00Z fold-second 2026-11-01",
			"2026-11-01T07:00:00Z normal 2026-11-01",
		}},
		{"Fall/WildcardIgnoresFoldFirst", ny, "0 * * * *", cron.Options{Fold: cron.FoldFirst, Gap: cron.GapRunAfter}, "2026-11-01T04:30:00Z", "2026-11-01T07:00:00Z", []string{
			"2026-11-01T05:00:00Z fold-first 2026-11-01",
			"2026-11-01T06:00:00Z fold-second 2026-11-01",
			"2026-11-01T07:00:00Z normal 2026-11-01",
		}},
	})
}

func TestDSTBerlin(t *testing.T) {
	t.Parallel()
	runDSTCases(t, []dstCase{
		// Spring forward 2026-03-29 02:00 CET -> 03:00 CEST (01:00Z).
		{"Spring/FixedInGap", berlin, "30 2 * * *", cron.Options{}, "2026-03-28T22:00:00Z", "2026-03-30T02:00:00Z", []string{
			"2026-03-29T01:00:00Z gap-run-after 2026-03-29",
			"2026-03-30T00:30:00Z normal 2026-03-30",
		}},
		{"Spring/Midnight", berlin, "0 0 * * *", cron.Options{}, "2026-03-28T22:00:00Z", "2026-03-30T02:00:00Z", []string{
			"2026-03-28T23:00:00Z normal 2026-03-29",
			"2026-03-29T22:00:00Z normal 2026-03-30",
		}},
		{"Spring/BeforeGap", berlin, "30 1 * * *", cron.Options{}, "2026-03-28T22:00:00Z", "2026-03-30T02:00:00Z", []string{
			"2026-03-29T00:30:00Z normal 2026-03-29",
			"2026-03-29T23:30:00Z normal 2026-03-30",
		}},
		{"Spring/Range", berlin, "0 1-3 * * *", cron.Options{}, "2026-03-28T22:00:00Z", "2026-03-30T02:00:00Z", []string{
			"2026-03-29T00:00:00Z normal 2026-03-29",
			"2026-03-29T01:00:00Z gap-run-after 2026-03-29",
			"2026-03-29T23:00:00Z normal 2026-03-30",
			"2026-03-30T00:00:00Z normal 2026-03-30",
			"2026-03-30T01:00:00Z normal 2026-03-30",
		}},
		{"Spring/SteppedHourIsWildcard", berlin, "0 */2 * * *", cron.Options{}, "2026-03-28T22:00:00Z", "2026-03-29T05:00:00Z", []string{
			"2026-03-28T23:00:00Z normal 2026-03-29",
			"2026-03-29T02:00:00Z normal 2026-03-29",
			"2026-03-29T04:00:00Z normal 2026-03-29",
		}},
		{"Spring/Wildcard", berlin, "*/30 * * * *", cron.Options{}, "2026-03-29T00:00:00Z", "2026-03-29T02:00:00Z", []string{
			"2026-03-29T00:30:00Z normal 2026-03-29",
			"2026-03-29T01:00:00Z normal 2026-03-29",
			"2026-03-29T01:30:00Z normal 2026-03-29",
			"2026-03-29T02:00:00Z normal 2026-03-29",
		}},

		// Fall back 2026-10-25 03:00 CEST -> 02:00 CET (01:00Z).
		{"Fall/FixedInFold", berlin, "30 2 * * *", cron.Options{}, "2026-10-24T21:00:00Z", "2026-10-26T03:00:00Z", []string{
			"2026-10-25T00:30:00Z fold-first 2026-10-25",
			"2026-10-26T01:30:00Z normal 2026-10-26",
		}},
		{"Fall/FixedInFoldBoth", berlin, "30 2 * * *", foldBoth, "2026-10-24T21:00:00Z", "2026-10-26T03:00:00Z", []string{
			"2026-10-25T00:30:00Z fold-first 2026-10-25",
			"2026-10-25T01:30:00Z fold-second 2026-10-25",
			"2026-10-26T01:30:00Z normal 2026-10-26",
		}},
		{"Fall/Midnight", berlin, "0 0 * * *", cron.Options{}, "2026-10-24T21:00:00Z", "2026-10-26T03:00:00Z", []string{
			"2026-10-24T22:00:00Z normal 2026-10-25",
			"2026-10-25T23:00:00Z normal 2026-10-26",
		}},
		{"Fall/BeforeFold", berlin, "30 1 * * *", cron.Options{}, "2026-10-24T21:00:00Z", "2026-10-26T03:00:00Z", []string{
			"2026-10-24T23:30:00Z normal 2026-10-25",
			"2026-10-26T00:30:00Z normal 2026-10-26",
		}},
		{"Fall/Range", berlin, "0 1-3 * * *", cron.Options{}, "2026-10-24T21:00:00Z", "2026-10-26T03:00:00Z", []string{
			"2026-10-24T23:00:00Z normal 2026-10-25",
			"2026-10-25T00:00:00Z fold-first 2026-10-25",
			"2026-10-25T02:00:00Z normal 2026-10-25",
			"2026-10-26T00:00:00Z normal 2026-10-26",
			"2026-10-26T01:00:00Z normal 2026-10-26",
			"2026-10-26T02:00:00Z normal 2026-10-26",
		}},
		{"Fall/SteppedHourIsWildcard", berlin, "0 */2 * * *", cron.Options{}, "2026-10-24T21:00:00Z", "2026-10-25T03:00:00Z", []string{
			"2026-10-24T22:00:00Z normal 2026-10-25",
			"2026-10-25T00:00:00Z fold-first 2026-10-25",
			"2026-10-25T01:00:00Z fold-second 2026-10-25",
			"2026-10-25T03:00:00Z normal 2026-10-25",
		}},
		{"Fall/Wildcard", berlin, "*/30 * * * *", cron.Options{}, "2026-10-24T23:45:00Z", "2026-10-25T02:00:00Z", []string{
			"2026-10-25T00:00:00Z fold-first 2026-10-25",
			"2026-10-25T00:30:00Z fold-first 2026-10-25",
			"2026-10-25T01:00:00Z fold-second 2026-10-25",
			"2026-10-25T01:30:00Z fold-second 2026-10-25",
			"2026-10-25T02:00:00Z normal 2026-10-25",
		}},
	})
}

func TestDSTLordHowe(t *testing.T) {
	t.Parallel()
	runDSTCases(t, []dstCase{
		// Fall back 2026-04-05 02:00 +11 -> 01:30 +10:30 (04-04 15:00Z):
		// 01:30-01:59 occur twice.
		{"Fall/AfterFold", lhi, "30 2 * * *", cron.Options{}, "2026-04-04T12:00:00Z", "2026-04-05T17:00:00Z", []string{
			"2026-04-04T16:00:00Z normal 2026-04-05",
			"2026-04-05T16:00:00Z normal 2026-04-06",
		}},
		{"Fall/Midnight", lhi, "0 0 * * *", cron.Options{}, "2026-04-04T12:00:00Z", "2026-04-05T17:00:00Z", []string{
			"2026-04-04T13:00:00Z normal 2026-04-05",
			"2026-04-05T13:30:00Z normal 2026-04-06",
		}},
		{"Fall/FixedInHalfHourFold", lhi, "30 1 * * *", cron.Options{}, "2026-04-04T12:00:00Z", "2026-04-05T17:00:00Z", []string{
			"2026-04-04T14:30:00Z fold-first 2026-04-05",
			"2026-04-05T15:00:00Z normal 2026-04-06",
		}},
		{"Fall/FixedInHalfHourFoldBoth", lhi, "30 1 * * *", foldBoth, "2026-04-04T12:00:00Z", "2026-04-05T17:00:00Z", []string{
			"2026-04-04T14:30:00Z fold-first 2026-04-05",
			"2026-04-04T15:00:00Z fold-second 2026-04-05",
			"2026-04-05T15:00:00Z normal 2026-04-06",
		}},
		{"Fall/RangeHoursAreNotAmbiguous", lhi, "0 1-3 * * *", cron.Options{}, "2026-04-04T12:00:00Z", "2026-04-05T17:00:00Z", []string{
			"2026-04-04T14:00:00Z normal 2026-04-05",
			"2026-04-04T15:30:00Z normal 2026-04-05",
			"2026-04-04T16:30:00Z normal 2026-04-05",
			"2026-04-05T14:30:00Z normal 2026-04-06",
			"2026-04-05T15:30:00Z normal 2026-04-06",
			"2026-04-05T16:30:00Z normal 2026-04-06",
		}},
		{"Fall/SteppedHourIsWildcard", lhi, "0 */2 * * *", cron.Options{}, "2026-04-04T12:00:00Z", "2026-04-04T18:00:00Z", []string{
			"2026-04-04T13:00:00Z normal 2026-04-05",
			"2026-04-04T15:30:00Z normal 2026-04-05",
			"2026-04-04T17:30:00Z normal 2026-04-05",
		}},
		{"Fall/Wildcard", lhi, "*/30 * * * *", cron.Options{}, "2026-04-04T13:45:00Z", "2026-04-04T16:00:00Z", []string{
			"2026-04-04T14:00:00Z normal 2026-04-05",
			"2026-04-04T14:30:00Z fold-first 2026-04-05",
			"2026-04-04T15:00:00Z fold-second 2026-04-05",
			"2026-04-04T15:30:00Z normal 2026-04-05",
			"2026-04-04T16:00:00Z normal 2026-04-05",
		}},

		// Spring forward 2026-10-04 02:00 +10:30 -> 02:30 +11 (10-03
		// 15:30Z): 02:00-02:29 do not exist, 02:30 does.
		{"Spring/HalfPastIsJustAfterGap", lhi, "30 2 * * *", cron.Options{}, "2026-10-03T12:00:00Z", "2026-10-04T17:00:00Z", []string{
			"2026-10-03T15:30:00Z normal 2026-10-04",
			"2026-10-04T15:30:00Z normal 2026-10-05",
		}},
		{"Spring/FixedInHalfHourGap", lhi, "0 2 * * *", cron.Options{}, "2026-10-03T12:00:00Z", "2026-10-04T17:00:00Z", []string{
			"2026-10-03T15:30:00Z gap-run-after 2026-10-04",
			"2026-10-04T15:00:00Z normal 2026-10-05",
		}},
		{"Spring/FixedInHalfHourGapSkipped", lhi, "0 2 * * *", gapSkip, "2026-10-03T12:00:00Z", "2026-10-04T17:00:00Z", []string{
			"2026-10-04T15:00:00Z normal 2026-10-05",
		}},
		{"Spring/GapTimeAndLaterTimeSameHour", lhi, "15,45 2 * * *", cron.Options{}, "2026-10-03T12:00:00Z", "2026-10-03T17:00:00Z", []string{
			"2026-10-03T15:30:00Z gap-run-after 2026-10-04",
			"2026-10-03T15:45:00Z normal 2026-10-04",
		}},
		{"Spring/Midnight", lhi, "0 0 * * *", cron.Options{}, "2026-10-03T12:00:00Z", "2026-10-04T17:00:00Z", []string{
			"2026-10-03T13:30:00Z normal 2026-10-04",
			"2026-10-04T13:00:00Z normal 2026-10-05",
		}},
		{"Spring/BeforeGap", lhi, "30 1 * * *", cron.Options{}, "2026-10-03T12:00:00Z", "2026-10-04T17:00:00Z", []string{
			"2026-10-03T15:00:00Z normal 2026-10-04",
			"2026-10-04T14:30:00Z normal 2026-10-05",
		}},
		{"Spring/Range", lhi, "0 1-3 * * *", cron.Options{}, "2026-10-03T12:00:00Z", "2026-10-04T17:00:00Z", []string{
			"2026-10-03T14:30:00Z normal 2026-10-04",
			"2026-10-03T15:30:00Z gap-run-after 2026-10-04",
			"2026-10-03T16:00:00Z normal 2026-10-04",
			"2026-10-04T14:00:00Z normal 2026-10-05",
			"2026-10-04T15:00:00Z normal 2026-10-05",
			"2026-10-04T16:00:00Z normal 2026-10-05",
		}},
		{"Spring/SteppedHourIsWildcard", lhi, "0 */2 * * *", cron.Options{}, "2026-10-03T12:00:00Z", "2026-10-03T18:00:00Z", []string{
			"2026-10-03T13:30:00Z normal 2026-10-04",
			"2026-10-03T17:00:00Z normal 2026-10-04",
		}},
		{"Spring/Wildcard", lhi, "*/30 * * * *", cron.Options{}, "2026-10-03T14:00:00Z", "2026-10-03T16:00:00Z", []string{
			"2026-10-03T14:30:00Z normal 2026-10-04",
			"2026-10-03T15:00:00Z normal 2026-10-04",
			"2026-10-03T15:30:00Z normal 2026-10-04",
			"2026-10-03T16:00:00Z normal 2026-10-04",
		}},
	})
}

func TestDSTHavana(t *testing.T) {
	t.Parallel()
	runDSTCases(t, []dstCase{
		// Spring forward at local midnight: 2026-03-08 00:00 CST -> 01:00
		// CDT (05:00Z). Local midnight does not exist that day.
		{"Spring/MidnightInGap", havana, "0 0 * * *", cron.Options{}, "2026-03-07T04:00:00Z", "2026-03-09T08:00:00Z", []string{
			"2026-03-07T05:00:00Z normal 2026-03-07",
			"2026-03-08T05:00:00Z gap-run-after 2026-03-08",
			"2026-03-09T04:00:00Z normal 2026-03-09",
		}},
		{"Spring/MidnightInGapSkipped", havana, "0 0 * * *", gapSkip, "2026-03-07T04:00:00Z", "2026-03-09T08:00:00Z", []string{
			"2026-03-07T05:00:00Z normal 2026-03-07",
			"2026-03-09T04:00:00Z normal 2026-03-09",
		}},
		{"Spring/GapTimesCoalesce", havana, "0,30 0 * * *", cron.Options{}, "2026-03-08T00:00:00Z", "2026-03-08T12:00:00Z", []string{
			"2026-03-08T05:00:00Z gap-run-after 2026-03-08",
		}},
		{"Spring/SecondsFieldInGap", havana, "30 0 0 * * *", cron.Options{}, "2026-03-08T00:00:00Z", "2026-03-09T12:00:00Z", []string{
			"2026-03-08T05:00:00Z gap-run-after 2026-03-08",
			"2026-03-09T04:00:30Z normal 2026-03-09",
		}},
		{"Spring/AfterGap", havana, "30 2 * * *", cron.Options{}, "2026-03-07T04:00:00Z", "2026-03-09T08:00:00Z", []string{
			"2026-03-07T07:30:00Z normal 2026-03-07",
			"2026-03-08T06:30:00Z normal 2026-03-08",
			"2026-03-09T06:30:00Z normal 2026-03-09",
		}},
		{"Spring/JustAfterGap", havana, "30 1 * * *", cron.Options{}, "2026-03-07T04:00:00Z", "2026-03-09T08:00:00Z", []string{
			"2026-03-07T06:30:00Z normal 2026-03-07",
			"2026-03-08T05:30:00Z normal 2026-03-08",
			"2026-03-09T05:30:00Z normal 2026-03-09",
		}},
		{"Spring/Range", havana, "0 1-3 * * *", cron.Options{}, "2026-03-07T04:00:00Z", "2026-03-09T08:00:00Z", []string{
			"2026-03-07T06:00:00Z normal 2026-03-07",
			"2026-03-07T07:00:00Z normal 2026-03-07",
			"2026-03-07T08:00:00Z normal 2026-03-07",
			"2026-03-08T05:00:00Z normal 2026-03-08",
			"2026-03-08T06:00:00Z normal 2026-03-08",
			"2026-03-08T07:00:00Z normal 2026-03-08",
			"2026-03-09T05:00:00Z normal 2026-03-09",
			"2026-03-09T06:00:00Z normal 2026-03-09",
			"2026-03-09T07:00:00Z normal 2026-03-09",
		}},
		{"Spring/SteppedHourIsWildcard", havana, "0 */2 * * *", cron.Options{}, "2026-03-08T03:00:00Z", "2026-03-08T09:00:00Z", []string{
			"2026-03-08T06:00:00Z normal 2026-03-08",
			"2026-03-08T08:00:00Z normal 2026-03-08",
		}},
		{"Spring/Wildcard", havana, "*/30 * * * *", cron.Options{}, "2026-03-08T04:00:00Z", "2026-03-08T06:00:00Z", []string{
			"2026-03-08T04:30:00Z normal 2026-03-07",
			"2026-03-08T05:00:00Z normal 2026-03-08",
			"2026-03-08T05:30:00Z normal 2026-03-08",
			"2026-03-08T06:00:00Z normal 2026-03-08",
		}},

		// Fall back 2026-11-01 01:00 CDT -> 00:00 CST (05:00Z):
		// midnight occurs twice.
		{"Fall/MidnightInFold", havana, "0 0 * * *", cron.Options{}, "2026-10-31T02:00:00Z", "2026-11-02T07:00:00Z", []string{
			"2026-10-31T04:00:00Z normal 2026-10-31",
			"2026-11-01T04:00:00Z fold-first 2026-11-01",
			"2026-11-02T05:00:00Z normal 2026-11-02",
		}},
		{"Fall/MidnightInFoldBoth", havana, "0 0 * * *", foldBoth, "2026-10-31T02:00:00Z", "2026-11-02T07:00:00Z", []string{
			"2026-10-31T04:00:00Z normal 2026-10-31",
			"2026-11-01T04:00:00Z fold-first 2026-11-01",
			"2026-11-01T05:00:00Z fold-second 2026-11-01",
			"2026-11-02T05:00:00Z normal 2026-11-02",
		}},
		{"Fall/AfterFold", havana, "30 2 * * *", cron.Options{}, "2026-10-31T02:00:00Z", "2026-11-02T07:00:00Z", []string{
			"2026-10-31T06:30:00Z normal 2026-10-31",
			"2026-11-01T07:30:00Z normal 2026-11-01",
		}},
		{"Fall/HalfPastOneOnce", havana, "30 1 * * *", cron.Options{}, "2026-10-31T02:00:00Z", "2026-11-02T07:00:00Z", []string{
			"2026-10-31T05:30:00Z normal 2026-10-31",
			"2026-11-01T06:30:00Z normal 2026-11-01",
			"2026-11-02T06:30:00Z normal 2026-11-02",
		}},
		{"Fall/Range", havana, "0 1-3 * * *", cron.Options{}, "2026-10-31T02:00:00Z", "2026-11-02T07:00:00Z", []string{
			"2026-10-31T05:00:00Z normal 2026-10-31",
			"2026-10-31T06:00:00Z normal 2026-10-31",
			"2026-10-31T07:00:00Z normal 2026-10-31",
			"2026-11-01T06:00:00Z normal 2026-11-01",
			"2026-11-01T07:00:00Z normal 2026-11-01",
			"2026-11-01T08:00:00Z normal 2026-11-01",
			"2026-11-02T06:00:00Z normal 2026-11-02",
			"2026-11-02T07:00:00Z normal 2026-11-02",
		}},
		{"Fall/SteppedHourIsWildcard", havana, "0 */2 * * *", cron.Options{}, "2026-11-01T03:00:00Z", "2026-11-01T08:00:00Z", []string{
			"2026-11-01T04:00:00Z fold-first 2026-11-01",
			"2026-11-01T05:00:00Z fold-second 2026-11-01",
			"2026-11-01T07:00:00Z normal 2026-11-01",
		}},
		{"Fall/Wildcard", havana, "*/30 * * * *", cron.Options{}, "2026-11-01T03:00:00Z", "2026-11-01T06:00:00Z", []string{
			"2026-11-01T03:30:00Z normal 2026-10-31",
			"2026-11-01T04:00:00Z fold-first 2026-11-01",
			"2026-11-01T04:30:00Z fold-first 2026-11-01",
			"2026-11-01T05:00:00Z fold-second 2026-11-01",
			"2026-11-01T05:30:00Z fold-second 2026-11-01",
			"2026-11-01T06:00:00Z normal 2026-11-01",
		}},
		{"Fall/WildcardSeconds", havana, "*/20 0 0 * * *", cron.Options{}, "2026-11-01T03:00:00Z", "2026-11-01T06:00:00Z", []string{
			"2026-11-01T04:00:00Z fold-first 2026-11-01",
			"2026-11-01T04:00:20Z fold-first 2026-11-01",
			"2026-11-01T04:00:40Z fold-first 2026-11-01",
			"2026-11-01T05:00:00Z fold-second 2026-11-01",
			"2026-11-01T05:00:20Z fold-second 2026-11-01",
			"2026-11-01T05:00:40Z fold-second 2026-11-01",
		}},
		{"Spring/WildcardSecondsNoneInGap", havana, "*/20 0 0 * * *", cron.Options{}, "2026-03-07T12:00:00Z", "2026-03-09T12:00:00Z", []string{
			"2026-03-09T04:00:00Z normal 2026-03-09",
			"2026-03-09T04:00:20Z normal 2026-03-09",
			"2026-03-09T04:00:40Z normal 2026-03-09",
		}},
	})
}

func TestNoDSTZones(t *testing.T) {
	t.Parallel()
	runDSTCases(t, []dstCase{
		{"Seoul/Fixed", seoul, "30 2 * * *", cron.Options{}, "2026-03-07T14:00:00Z", "2026-03-08T16:00:00Z", []string{
			"2026-03-07T17:30:00Z normal 2026-03-08",
		}},
		{"Seoul/Midnight", seoul, "0 0 * * *", cron.Options{}, "2026-03-07T14:00:00Z", "2026-03-08T16:00:00Z", []string{
			"2026-03-07T15:00:00Z normal 2026-03-08",
			"2026-03-08T15:00:00Z normal 2026-03-09",
		}},
		{"Seoul/HalfPastOne", seoul, "30 1 * * *", cron.Options{}, "2026-10-31T14:00:00Z", "2026-11-01T16:00:00Z", []string{
			"2026-10-31T16:30:00Z normal 2026-11-01",
		}},
		{"Seoul/Range", seoul, "0 1-3 * * *", cron.Options{}, "2026-03-07T14:00:00Z", "2026-03-08T16:00:00Z", []string{
			"2026-03-07T16:00:00Z normal 2026-03-08",
			"2026-03-07T17:00:00Z normal 2026-03-08",
			"2026-03-07T18:00:00Z normal 2026-03-08",
			"2026-03-08T16:00:00Z normal 2026-03-09",
		}},
		{"Seoul/Stepped", seoul, "0 */2 * * *", cron.Options{}, "2026-03-07T14:00:00Z", "2026-03-07T20:00:00Z", []string{
			"2026-03-07T15:00:00Z normal 2026-03-08",
			"2026-03-07T17:00:00Z normal 2026-03-08",
			"2026-03-07T19:00:00Z normal 2026-03-08",
		}},
		{"Seoul/Wildcard", seoul, "*/30 * * * *", cron.Options{}, "2026-03-07T17:00:00Z", "2026-03-07T18:00:00Z", []string{
			"2026-03-07T17:30:00Z normal 2026-03-08",
			"2026-03-07T18:00:00Z normal 2026-03-08",
		}},
		{"UTC/Fixed", utcZone, "30 2 * * *", cron.Options{}, "2026-03-08T00:00:00Z", "2026-03-09T00:00:00Z", []string{
			"2026-03-08T02:30:00Z normal 2026-03-08",
		}},
		{"UTC/Midnight", utcZone, "0 0 * * *", cron.Options{}, "2026-03-08T00:00:00Z", "2026-03-09T00:00:00Z", []string{
			"2026-03-09T00:00:00Z normal 2026-03-09",
		}},
		{"UTC/Range", utcZone, "0 1-3 * * *", cron.Options{}, "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z", []string{
			"2026-11-01T01:00:00Z normal 2026-11-01",
			"2026-11-01T02:00:00Z normal 2026-11-01",
			"2026-11-01T03:00:00Z normal 2026-11-01",
		}},
		{"UTC/Wildcard", utcZone, "*/30 * * * *", cron.Options{}, "2026-11-01T00:45:00Z", "2026-11-01T02:00:00Z", []string{
			"2026-11-01T01:00:00Z normal 2026-11-01",
			"2026-11-01T01:30:00Z normal 2026-11-01",
			"2026-11-01T02:00:00Z normal 2026-11-01",
		}},
		{"UTCByDefault", "", "30 1 * * *", cron.Options{}, "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z", []string{
			"2026-11-01T01:30:00Z normal 2026-11-01",
		}},
	})
}

// TestDailyCount2026 counts `0 0 * * *` over the local year 2026: one fire
// per local date in every zone, the Havana gap day included (gap-run-after)
// and its repeated midnight fired once.
func TestDailyCount2026(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{ny, berlin, lhi, havana, seoul, utcZone} {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			s, err := cron.Parse("0 0 * * *", cron.Options{Zone: zone})
			require.NoError(t, err)
			// From well before local 2026-01-01 to well after 2026-12-31.
			fires := s.Between(utc(t, "2025-12-30T00:00:00Z"), utc(t, "2027-01-02T00:00:00Z"), 1000)
			dates := map[string]bool{}
			for i, f := range fires {
				if i > 0 {
					require.True(t, f.At.After(fires[i-1].At))
				}
				if f.BusinessDate[:4] == "2026" {
					require.False(t, dates[f.BusinessDate], "duplicate %s", f.BusinessDate)
					dates[f.BusinessDate] = true
				}
			}
			require.Len(t, dates, 365)
		})
	}
}
