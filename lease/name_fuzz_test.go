package lease_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// FuzzLeaseName: any name either is refused with lease.ErrInvalidName
// before Redis sees a command, or names a lease that lives in its own
// hash-tagged key, is acquired with a token, released, and acquired again
// with a larger token.
func FuzzLeaseName(f *testing.F) {
	for _, seed := range []string{"daily-settlement", "", "a", "{x}", "job:2026-03-08T02:00:00Z:eu", "ü€𝄞", "\x00", strings.Repeat("n", leasedriver.MaxNameLen), strings.Repeat("n", leasedriver.MaxNameLen+1), "a}b", " ", "\u3000", "eu\u200b", "\u202eue", "\u3164", "\u2800", "a\u034fb", "a\ufe0fb"} {
		f.Add(seed)
	}
	rdb, mr := leasetest.NewMiniredisClient(f)
	c, err := lease.New(rdb, lease.Options{Prefix: "fuzz:"})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, name string) {
		ctx := context.Background()
		before := mr.CommandCount()
		l, err := c.TryAcquire(ctx, name, time.Minute)
		if err != nil {
			require.ErrorIs(t, err, lease.ErrInvalidName)
			require.Equal(t, before, mr.CommandCount(), "refused before any I/O")
			require.True(t, name == "" || len(name) > leasedriver.MaxNameLen || strings.ContainsAny(name, "{}") || !printableName(name),
				"refused a valid name %q: %v", name, err)
			return
		}
		keys, err := leasejoin.Backend(c).(*redislease.Backend).Keys(name)
		require.NoError(t, err)
		leaseKey := keys.Lease
		require.Equal(t, "fuzz:{"+name+"}", leaseKey)
		require.Equal(t, leaseKey+":fence", keys.Fence)
		require.Equal(t, name, l.Name())
		owner, err := rdb.Get(ctx, leaseKey).Result()
		require.NoError(t, err)
		require.Equal(t, l.Holder().Owner, owner)
		require.NoError(t, l.Release(ctx))
		require.False(t, mr.Exists(leaseKey), "released")
		again, err := c.TryAcquire(ctx, name, time.Minute)
		require.NoError(t, err)
		require.Greater(t, again.Token(), l.Token())
		require.NoError(t, again.Release(ctx))
	})
}

// printableName is the fuzz oracle's reading of the rule: valid UTF-8, no
// control (Cc), format (Cf) or other default-ignorable character, not white
// space (or the blank U+2800) alone.
func printableName(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
		return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
	}) && strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '\u2800' }) != ""
}
