package cron_test

import (
	"testing"
	"time"

	_ "time/tzdata" // pin the tz database: expectations below are for tzdata 2025+

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// utc parses an RFC 3339 literal; test tables are written in UTC.
func utc(tb testing.TB, s string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		tb.Fatalf("bad literal %q: %v", s, err)
	}
	return t
}
