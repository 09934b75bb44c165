package cron_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/cron"
)

// FuzzParse: Parse never panics, every error is a *ParseError matching one
// of the sentinels, and a schedule that parses yields sane fires.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"30 2 * * *", "*/30 * * * *", "0 0 1 * MON", "10,40 */15 9 * * MON-FRI",
		"@daily", "@hourly", "@every 1h30m", "@every -1s", "@every",
		"CRON_TZ=America/New_York 30 2 * * *", "TZ=Europe/Berlin @weekly",
		"CRON_TZ=UTC", "TZ=", "TZ= ", "CRON_TZ=UTC TZ=UTC", "0 , * * *",
		"*/0 * * * *", "5-1 * * * *", "0 0 30 2 *", "? ? ? ? ? ?", "", " ",
		"0 0 * * 7", "1-2-3 * * * *", "*/2/3 * * * *", "0 0 * JAN-DEC SUN-SAT",
	} {
		f.Add(seed, "", uint8(0))
	}
	f.Add("0 0 * * *", "America/Havana", uint8(3))
	f.Add("0 0 * * *", "Local", uint8(0))
	f.Add("0 0 * * *", "../etc", uint8(1))

	after := time.Date(2026, 3, 8, 4, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, spec, zone string, policy uint8) {
		opts := cron.Options{Zone: zone, Gap: cron.GapPolicy(policy & 1), Fold: cron.FoldPolicy(policy >> 1 & 1)}
		s, err := cron.Parse(spec, opts)
		if err != nil {
			require.Nil(t, s)
			var pe *cron.ParseError
			require.ErrorAs(t, err, &pe)
			require.True(t, errors.Is(err, cron.ErrInvalidSpec) || errors.Is(err, cron.ErrUnknownZone) ||
				errors.Is(err, cron.ErrZoneConflict) || errors.Is(err, cron.ErrInvalidOptions), err.Error())
			return
		}
		prev := after
		for _, fire := range s.Between(after, after.Add(72*time.Hour), 20) {
			require.True(t, fire.At.After(prev))
			require.Zero(t, fire.At.Nanosecond())
			require.True(t, fire.Local.Equal(fire.At))
			require.Len(t, fire.BusinessDate, len("2006-01-02"))
			prev = fire.At
		}
		if fire, ok := s.Next(after); ok {
			require.True(t, fire.At.After(after))
		}
	})
}
