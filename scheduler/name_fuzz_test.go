package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// FuzzJobNameAndPartition: any job name and partition key is either
// refused by Register with scheduler.ErrInvalidJob, or accepted (never a
// blank one, nor one holding a control, format or default-ignorable
// character), in which
// case the slot's idempotency key carries both and the ledger answers for
// the pair.
func FuzzJobNameAndPartition(f *testing.F) {
	for _, seed := range [][2]string{
		{"daily-settlement", ""}, {"settle", "eu"}, {"", ""}, {"a|b", ""}, {"a", "{x}"},
		{"job:with:colons", "p:q"}, {"ü€", "𝄞"}, {"\x00", ""}, {"a\nb", ""},
		{" ", ""}, {"settle", " "}, {"settle\u200b", ""}, {"settle", "eu\u200b"}, {"settle", "\u202eue"}, {"\u3000", ""},
		// The trial's blank-looking and invisible names (default-ignorable, U+2800).
		{"\u3164", ""}, {"\u2800\u2800", ""}, {"\u115f", ""}, {"\uffa0", ""}, {"a\u034fb", ""}, {"settle", "a\u034fb"}, {"settle", "\u2800"},
		{strings.Repeat("j", ledger.MaxJobNameLen), strings.Repeat("p", ledger.MaxPartitionLen)},
		{strings.Repeat("j", ledger.MaxJobNameLen+1), ""}, {"j", strings.Repeat("p", ledger.MaxPartitionLen+1)},
	} {
		f.Add(seed[0], seed[1])
	}
	rdb, _ := leasetest.NewMiniredisClient(f)
	leases, err := lease.New(rdb, lease.Options{Prefix: "fuzz:lease:"})
	require.NoError(f, err)
	ldg, err := redisledger.New(rdb, redisledger.Options{Prefix: "fuzz:ledger:"})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, name, partition string) {
		s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg})
		require.NoError(t, err)
		job := scheduler.Job{Name: name, Spec: "0 0 0 1 1 *", Run: func(context.Context, scheduler.Run) error { return nil }}
		if partition != "" {
			job.Partitions = []string{partition}
		}
		if err := s.Register(job); err != nil {
			require.ErrorIs(t, err, scheduler.ErrInvalidJob)
			return
		}
		for _, v := range []string{name, partition} {
			require.False(t, strings.TrimFunc(v, func(r rune) bool { return unicode.IsSpace(r) || r == '\u2800' }) == "" && v != "",
				"accepted the blank name %q", v)
			require.False(t, strings.ContainsFunc(v, func(r rune) bool {
				return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
			}), "accepted %q, which holds a control, format or default-ignorable character", v)
		}
		require.ErrorIs(t, s.Register(job), scheduler.ErrInvalidJob)
		at := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)
		key := ledger.Slot{Job: name, At: at, Partition: partition}.Key()
		if plainKey(name, true) && plainKey(partition, false) {
			require.Equal(t, name+":2026-03-08T07:00:00Z:"+partition, key, "a printable ASCII name is carried as it is")
		}
		for i := 0; i < len(key); i++ {
			require.True(t, key[i] >= 0x20 && key[i] <= 0x7e, "key %q: byte %#x is not printable ASCII", key, key[i])
		}
		ctx := context.Background()
		if _, err := ldg.State(ctx, name, partition, at, at); err != nil {
			require.False(t, errors.Is(err, scheduler.ErrInvalidJob), "the ledger refused what Register accepted: %v", err)
			t.Fatalf("ledger state of %q/%q: %v", name, partition, err)
		}
	})
}

// plainKey reports whether v is carried into a slot key unchanged:
// printable ASCII without '%' (and without ':' in a job name).
func plainKey(v string, job bool) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e || c == '%' || (job && c == ':') {
			return false
		}
	}
	return true
}
