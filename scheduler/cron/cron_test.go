package cron_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/cron"
)

func mustParse(t *testing.T, spec string, opts cron.Options) *cron.Schedule {
	t.Helper()
	s, err := cron.Parse(spec, opts)
	require.NoError(t, err)
	return s
}

func nextAt(t *testing.T, s *cron.Schedule, after string) string {
	t.Helper()
	f, ok := s.Next(utc(t, after))
	require.True(t, ok)
	return f.At.Format(time.RFC3339)
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	long := "0 0 * * *" + strings.Repeat(" ", cron.MaxSpecLen)
	cases := []struct {
		name string
		spec string
		opts cron.Options
		want error
	}{
		{"Empty", "", cron.Options{}, cron.ErrInvalidSpec},
		{"Blank", " \t\n", cron.Options{}, cron.ErrInvalidSpec},
		{"TooLong", long, cron.Options{}, cron.ErrInvalidSpec},
		{"FourFields", "* * * *", cron.Options{}, cron.ErrInvalidSpec},
		{"SevenFields", "* * * * * * *", cron.Options{}, cron.ErrInvalidSpec},
		{"MinuteOutOfRange", "60 * * * *", cron.Options{}, cron.ErrInvalidSpec},
		{"HourOutOfRange", "0 24 * * *", cron.Options{}, cron.ErrInvalidSpec},
		{"DomZero", "0 0 0 * *", cron.Options{}, cron.ErrInvalidSpec},
		{"Dom32", "0 0 32 * *", cron.Options{}, cron.ErrInvalidSpec},
		{"Month13", "0 0 * 13 *", cron.Options{}, cron.ErrInvalidSpec},
		{"Dow7", "0 0 * * 7", cron.Options{}, cron.ErrInvalidSpec},
		{"ZeroStep", "*/0 * * * *", cron.Options{}, cron.ErrInvalidSpec},
		{"BackwardRange", "5-1 * * * *", cron.Options{}, cron.ErrInvalidSpec},
		{"NotANumber", "a * * * *", cron.Options{}, cron.ErrInvalidSpec},
		{"EmptyList", "0 , * * *", cron.Options{}, cron.ErrInvalidSpec},
		{"DescriptorWithExtra", "@daily extra", cron.Options{}, cron.ErrInvalidSpec},
		{"UnknownDescriptor", "@fortnightly", cron.Options{}, cron.ErrInvalidSpec},
		{"EveryWithoutDuration", "@every", cron.Options{}, cron.ErrInvalidSpec},
		{"EveryBadDuration", "@every soon", cron.Options{}, cron.ErrInvalidSpec},
		{"EveryNegative", "@every -1m", cron.Options{}, cron.ErrInvalidSpec},
		{"EveryZero", "@every 0s", cron.Options{}, cron.ErrInvalidSpec},
		// Issue 11: sub-second and fractional intervals silently ran every
		// second; slots are whole seconds, so they are refused.
		{"EverySubSecond", "@every 500ms", cron.Options{}, cron.ErrInvalidSpec},
		{"EveryFractionalSeconds", "@every 1500ms", cron.Options{}, cron.ErrInvalidSpec},
		{"EveryFractionalMinute", "@every 1.5s", cron.Options{}, cron.ErrInvalidSpec},
		// Issue 11: specs that never fire registered with a zero Next.
		{"February30th", "0 0 30 2 *", cron.Options{}, cron.ErrInvalidSpec},
		{"April31st", "0 0 31 4 *", cron.Options{}, cron.ErrInvalidSpec},
		{"ThirtyFirstOfShortMonths", "0 0 0 31 2,4,6,9,11 *", cron.Options{}, cron.ErrInvalidSpec},
		{"PrefixOnly", "CRON_TZ=UTC", cron.Options{}, cron.ErrInvalidSpec}, // robfig panics on this
		{"TZPrefixOnly", "TZ=UTC", cron.Options{}, cron.ErrInvalidSpec},
		{"TwoPrefixes", "CRON_TZ=UTC TZ=UTC 0 0 * * *", cron.Options{}, cron.ErrInvalidSpec},
		{"NestedPrefixWithoutSchedule", "CRON_TZ=UTC TZ=UTC", cron.Options{}, cron.ErrInvalidSpec},
		{"UnknownZoneOption", "0 0 * * *", cron.Options{Zone: "Mars/Olympus_Mons"}, cron.ErrUnknownZone},
		{"UnknownZonePrefix", "CRON_TZ=Mars/Olympus_Mons 0 0 * * *", cron.Options{}, cron.ErrUnknownZone},
		{"EmptyZonePrefix", "CRON_TZ= 0 0 * * *", cron.Options{}, cron.ErrUnknownZone},
		{"LocalRefused", "0 0 * * *", cron.Options{Zone: "Local"}, cron.ErrUnknownZone},
		{"PathRefused", "0 0 * * *", cron.Options{Zone: "../../etc/passwd"}, cron.ErrUnknownZone},
		{"ZoneConflict", "CRON_TZ=Europe/Berlin 0 0 * * *", cron.Options{Zone: ny}, cron.ErrZoneConflict},
		{"AliasConflict", "TZ=US/Eastern 0 0 * * *", cron.Options{Zone: ny}, cron.ErrZoneConflict},
		{"BadGapPolicy", "0 0 * * *", cron.Options{Gap: 7}, cron.ErrInvalidOptions},
		{"BadFoldPolicy", "0 0 * * *", cron.Options{Fold: -1}, cron.ErrInvalidOptions},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := cron.Parse(tc.spec, tc.opts)
			require.Nil(t, s)
			require.ErrorIs(t, err, tc.want)
			var pe *cron.ParseError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.want, pe.Kind)
			require.LessOrEqual(t, len(pe.Spec), 64+len("..."))
			require.True(t, strings.HasPrefix(err.Error(), "cron: "), err.Error())
		})
	}
}

func TestParseErrorKeepsParserMessage(t *testing.T) {
	t.Parallel()
	_, err := cron.Parse("61 * * * *", cron.Options{})
	require.ErrorIs(t, err, cron.ErrInvalidSpec)
	var pe *cron.ParseError
	require.ErrorAs(t, err, &pe)
	require.Error(t, pe.Err)
	require.Contains(t, err.Error(), "above maximum")

	_, err = cron.Parse("0 0 * * *", cron.Options{Zone: "Nowhere/Nothing"})
	require.ErrorIs(t, err, cron.ErrUnknownZone)
	require.ErrorAs(t, err, &pe)
	require.Error(t, pe.Err, "time.LoadLocation's error is kept")
}

func TestWildcardClassification(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"*/30 * * * *":   true,
		"0 * * * *":      true, // hour starts with '*'
		"0 */2 * * *":    true,
		"* 2 * * *":      true,
		"? 2 * * *":      true, // the parser reads '?' as '*'
		"*/10 0 2 * * *": true, // seconds field
		"30 2 * * *":     false,
		"0 9-17 * * *":   false,
		"0 0-23 * * *":   false, // every hour, yet fixed-time by ISC's rule
		"0 1-3 * * *":    false,
		"0 30 2 * * *":   false,
		"0,30 2 * * *":   false,
		"@hourly":        true,
		"@daily":         false,
		"@midnight":      false,
		"@weekly":        false,
		"@monthly":       false,
		"@yearly":        false,
		"@annually":      false,
		"@every 1h":      false,
	}
	for spec, want := range cases {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, want, mustParse(t, spec, cron.Options{}).Wildcard())
		})
	}
}

func TestAccessors(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "  30 2 * * *  ", cron.Options{Zone: ny})
	require.Equal(t, "  30 2 * * *  ", s.Spec())
	require.Equal(t, ny, s.Zone().String())
	require.Zero(t, s.Interval())
	require.Equal(t, "UTC", mustParse(t, "0 0 * * *", cron.Options{}).Zone().String())

	var nilSched *cron.Schedule
	require.Equal(t, "", nilSched.Spec())
	require.Equal(t, time.UTC, nilSched.Zone())
	require.False(t, nilSched.Wildcard())
	require.Zero(t, nilSched.Interval())
	_, ok := nilSched.Next(time.Now())
	require.False(t, ok)
	require.Nil(t, nilSched.Between(time.Time{}, time.Now(), 10))

	require.Equal(t, "run-after", cron.GapRunAfter.String())
	require.Equal(t, "skip", cron.GapSkip.String())
	require.Equal(t, "first", cron.FoldFirst.String())
	require.Equal(t, "both", cron.FoldBoth.String())
	require.Equal(t, "normal", cron.RuleNormal.String())
	require.Equal(t, "gap-run-after", cron.RuleGapRunAfter.String())
	require.Equal(t, "fold-first", cron.RuleFoldFirst.String())
	require.Equal(t, "fold-second", cron.RuleFoldSecond.String())
	require.Equal(t, "Rule(9)", cron.Rule(9).String())
}

func TestZonePrefix(t *testing.T) {
	t.Parallel()
	t.Run("PrefixOnly", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "CRON_TZ=America/New_York 30 2 * * *", cron.Options{})
		require.Equal(t, ny, s.Zone().String())
		require.Equal(t, "2026-03-08T07:00:00Z", nextAt(t, s, "2026-03-08T04:00:00Z"))
	})
	t.Run("TZPrefix", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "TZ=Europe/Berlin 0 0 * * *", cron.Options{})
		require.Equal(t, berlin, s.Zone().String())
		require.Equal(t, "2026-03-28T23:00:00Z", nextAt(t, s, "2026-03-28T12:00:00Z"))
	})
	t.Run("SameAsOption", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "CRON_TZ=America/New_York 30 2 * * *", cron.Options{Zone: ny})
		require.Equal(t, ny, s.Zone().String())
	})
	t.Run("WithDescriptor", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "CRON_TZ=America/Havana @daily", cron.Options{})
		f, ok := s.Next(utc(t, "2026-03-07T12:00:00Z"))
		require.True(t, ok)
		require.Equal(t, "2026-03-08T05:00:00Z", f.At.Format(time.RFC3339))
		require.Equal(t, cron.RuleGapRunAfter, f.Rule)
	})
	t.Run("WithEvery", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "CRON_TZ=Asia/Seoul @every 1h", cron.Options{})
		f, ok := s.Next(utc(t, "2026-03-07T14:59:59Z"))
		require.True(t, ok)
		require.Equal(t, "2026-03-07T15:00:00Z", f.At.Format(time.RFC3339))
		require.Equal(t, "2026-03-08", f.BusinessDate) // local date in Seoul
	})
}

func TestDescriptors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		spec, after, want string
	}{
		{"@daily", "2026-03-08T00:00:00Z", "2026-03-08T05:00:00Z"},
		{"@midnight", "2026-03-08T00:00:00Z", "2026-03-08T05:00:00Z"},
		{"@weekly", "2026-03-08T00:00:00Z", "2026-03-08T05:00:00Z"}, // a Sunday
		{"@weekly", "2026-03-08T05:00:00Z", "2026-03-15T04:00:00Z"}, // next Sunday, EDT
		{"@monthly", "2026-03-08T00:00:00Z", "2026-04-01T04:00:00Z"},
		{"@yearly", "2026-03-08T00:00:00Z", "2027-01-01T05:00:00Z"},
		{"@annually", "2026-03-08T00:00:00Z", "2027-01-01T05:00:00Z"},
		{"@hourly", "2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z"}, // 03:00 EDT, 02:00 skipped
	}
	for _, tc := range cases {
		t.Run(tc.spec+"/"+tc.after, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, nextAt(t, mustParse(t, tc.spec, cron.Options{Zone: ny}), tc.after))
		})
	}
	t.Run("HourlyIsWildcardInFold", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "@hourly", cron.Options{Zone: ny})
		got := fireStrings(s.Between(utc(t, "2026-11-01T04:30:00Z"), utc(t, "2026-11-01T07:00:00Z"), 10))
		require.Equal(t, []string{
			"2026-11-01T05:00:00Z fold-first 2026-11-01",
			"2026-11-01T06:00:00Z fold-second 2026-11-01",
			"2026-11-01T07:00:00Z normal 2026-11-01",
		}, got)
	})
}

func TestEvery(t *testing.T) {
	t.Parallel()
	t.Run("AnchoredAtEpoch", func(t *testing.T) {
		t.Parallel()
		// 2026-03-08T00:00:00Z is Unix 1772928000 = 4221257*420 + 60, so
		// the next multiple of 7m is 360s later.
		s := mustParse(t, "@every 7m", cron.Options{})
		require.Equal(t, 7*time.Minute, s.Interval())
		require.Equal(t, "2026-03-08T00:06:00Z", nextAt(t, s, "2026-03-08T00:00:00Z"))
		require.Equal(t, "2026-03-08T00:13:00Z", nextAt(t, s, "2026-03-08T00:06:00Z"))
		// 5400 divides 2026-03-08T00:00:00Z; 07:30 = 5 * 1h30m later.
		s = mustParse(t, "@every 1h30m", cron.Options{Zone: ny})
		require.Equal(t, "2026-03-08T07:30:00Z", nextAt(t, s, "2026-03-08T06:59:59Z"))
	})
	t.Run("WholeSecondsOnly", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "@every 1s", cron.Options{})
		require.Equal(t, time.Second, s.Interval())
		require.Equal(t, "2026-03-08T00:00:01Z", nextAt(t, s, "2026-03-08T00:00:00.7Z"))
		require.Equal(t, 1500*time.Second, mustParse(t, "@every 25m", cron.Options{}).Interval())
		_, err := cron.Parse("@every 1500ms", cron.Options{})
		require.ErrorIs(t, err, cron.ErrInvalidSpec)
		require.ErrorContains(t, err, "not a whole number of seconds")
	})
	t.Run("RareButPossibleDaysParse", func(t *testing.T) {
		t.Parallel()
		// February 29th fires in leap years; a day of week makes the OR
		// rule apply, so February 30th or any Monday fires.
		leap := mustParse(t, "0 0 29 2 *", cron.Options{})
		require.Equal(t, "2028-02-29T00:00:00Z", nextAt(t, leap, "2026-03-08T00:00:00Z"))
		mustParse(t, "0 0 30 2 MON", cron.Options{})
		mustParse(t, "0 0 31 1-2 *", cron.Options{})
	})
	t.Run("NoDSTEffect", func(t *testing.T) {
		t.Parallel()
		s := mustParse(t, "@every 90s", cron.Options{Zone: ny})
		fires := s.Between(utc(t, "2026-03-08T06:58:00Z"), utc(t, "2026-03-08T07:01:30Z"), 10)
		require.Equal(t, []string{
			"2026-03-08T06:58:30Z normal 2026-03-08",
			"2026-03-08T07:00:00Z normal 2026-03-08",
			"2026-03-08T07:01:30Z normal 2026-03-08",
		}, fireStrings(fires))
		require.Equal(t, "2026-03-08T01:58:30-05:00", fires[0].Local.Format(time.RFC3339))
		require.Equal(t, "2026-03-08T03:00:00-04:00", fires[1].Local.Format(time.RFC3339))
	})
}

func TestSecondsField(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "10,40 */15 9 * * MON-FRI", cron.Options{Zone: berlin})
	got := fireStrings(s.Between(utc(t, "2026-03-27T07:59:00Z"), utc(t, "2026-03-30T07:20:00Z"), 20))
	require.Equal(t, []string{
		// Friday 03-27, CET (+1): 09:xx local = 08:xx Z.
		"2026-03-27T08:00:10Z normal 2026-03-27",
		"2026-03-27T08:00:40Z normal 2026-03-27",
		"2026-03-27T08:15:10Z normal 2026-03-27",
		"2026-03-27T08:15:40Z normal 2026-03-27",
		"2026-03-27T08:30:10Z normal 2026-03-27",
		"2026-03-27T08:30:40Z normal 2026-03-27",
		"2026-03-27T08:45:10Z normal 2026-03-27",
		"2026-03-27T08:45:40Z normal 2026-03-27",
		// Monday 03-30, CEST (+2): 09:xx local = 07:xx Z.
		"2026-03-30T07:00:10Z normal 2026-03-30",
		"2026-03-30T07:00:40Z normal 2026-03-30",
		"2026-03-30T07:15:10Z normal 2026-03-30",
		"2026-03-30T07:15:40Z normal 2026-03-30",
	}, got)
}

func TestDomDowRule(t *testing.T) {
	t.Parallel()
	// June 2026: the 1st is a Monday; July 1st is a Wednesday.
	cases := []struct {
		name, spec string
		want       []string
	}{
		{"BothRestrictedIsOr", "0 0 1 * MON", []string{"06-08", "06-15", "06-22", "06-29", "07-01", "07-06"}},
		{"StepDomIsRestricted", "0 0 */10 * MON", []string{"06-08", "06-11", "06-15", "06-21", "06-22", "06-29", "07-01", "07-06"}},
		{"StarDomIsAnd", "0 0 * * MON", []string{"06-08", "06-15", "06-22", "06-29", "07-06"}},
		{"QuestionDomIsAnd", "0 0 ? * MON", []string{"06-08", "06-15", "06-22", "06-29", "07-06"}},
		{"StarDowIsAnd", "0 0 1 * *", []string{"07-01"}},
		{"StarDowWithMonths", "0 0 1-7 JUL *", []string{"07-01", "07-02", "07-03", "07-04", "07-05", "07-06", "07-07"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tc.spec, cron.Options{})
			var got []string
			for _, f := range s.Between(utc(t, "2026-06-01T00:00:00Z"), utc(t, "2026-07-07T00:00:00Z"), 50) {
				got = append(got, f.BusinessDate[5:])
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestNextPrecisionAndRange(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "0 9 * * *", cron.Options{})
	t.Run("StrictlyAfterAtSecondPrecision", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "2026-05-02T09:00:00Z", nextAt(t, s, "2026-05-01T09:00:00Z"))
		require.Equal(t, "2026-05-02T09:00:00Z", nextAt(t, s, "2026-05-01T09:00:00.999Z"))
		require.Equal(t, "2026-05-01T09:00:00Z", nextAt(t, s, "2026-05-01T08:59:59.999Z"))
	})
	t.Run("AfterInAnyZone", func(t *testing.T) {
		t.Parallel()
		after := utc(t, "2026-05-01T08:00:00Z").In(time.FixedZone("X", -7*3600))
		f, ok := s.Next(after)
		require.True(t, ok)
		require.Equal(t, "2026-05-01T09:00:00Z", f.At.Format(time.RFC3339))
	})
	t.Run("NeverFiresIsRefused", func(t *testing.T) {
		t.Parallel()
		for _, spec := range []string{"0 0 30 2 *", "0 0 31 4,6,9,11 *"} {
			_, err := cron.Parse(spec, cron.Options{})
			require.ErrorIs(t, err, cron.ErrInvalidSpec, spec)
			require.ErrorContains(t, err, "never fires", spec)
		}
	})
	t.Run("LeapDayAcross2100", func(t *testing.T) {
		t.Parallel()
		leap := mustParse(t, "0 0 29 2 *", cron.Options{})
		require.Equal(t, "2028-02-29T00:00:00Z", nextAt(t, leap, "2026-01-01T00:00:00Z"))
		require.Equal(t, "2104-02-29T00:00:00Z", nextAt(t, leap, "2096-03-01T00:00:00Z"))
	})
	t.Run("FarOutOfRange", func(t *testing.T) {
		t.Parallel()
		_, ok := s.Next(time.Unix(1<<41, 0))
		require.False(t, ok)
		f, ok := s.Next(time.Time{}) // year 1
		require.True(t, ok)
		require.Equal(t, "0001-01-01T09:00:00Z", f.At.Format(time.RFC3339))
	})
}

func TestBetween(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "*/30 * * * *", cron.Options{})
	from, to := utc(t, "2026-01-01T00:00:00Z"), utc(t, "2026-01-01T02:00:00Z")
	require.Len(t, s.Between(from, to, 100), 4, "(from, to]: 00:30 01:00 01:30 02:00")
	require.Len(t, s.Between(from, to, 3), 3)
	require.Nil(t, s.Between(from, to, 0))
	require.Nil(t, s.Between(to, from, 10))
	require.Nil(t, s.Between(from, from, 10))
}

func TestFireLocalAndRuleOnExample(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "30 2 * * *", cron.Options{Zone: ny})
	f, ok := s.Next(utc(t, "2026-03-08T00:00:00Z"))
	require.True(t, ok)
	require.Equal(t, "2026-03-08T07:00:00Z", f.At.Format(time.RFC3339))
	require.Equal(t, "2026-03-08T03:00:00-04:00", f.Local.Format(time.RFC3339))
	require.Equal(t, "2026-03-08", f.BusinessDate)
	require.Equal(t, cron.RuleGapRunAfter, f.Rule)
}

// The business date is made once per date and reused (Schedule.fire):
// fires asked for out of order, on dates that alternate, concurrently,
// each carry their own date (in the spec's zone: 23:30 in New York is
// the next day in UTC).
func TestBusinessDateOfFiresOutOfOrder(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "30 23 * * *", cron.Options{Zone: "America/New_York"})
	days := []time.Time{
		time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC),
		time.Date(2025, 12, 31, 12, 0, 0, 0, time.UTC),
	}
	want := []string{"2026-03-07", "2026-01-01", "2026-03-07", "2025-12-31"}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				for i, d := range days {
					f, ok := s.Next(d)
					if !ok || f.BusinessDate != want[i] {
						t.Errorf("Next(%v): %q (ok %v), want %q", d, f.BusinessDate, ok, want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
