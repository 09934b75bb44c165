package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

// IdempotencyKey is Key while Key fits MaxIdempotencyKeyLen, and a
// bounded form of it beyond, the same in every build.
func TestSlotIdempotencyKeyIsBounded(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC)
	const fixed = len(":2026-03-08T06:00:00Z:") // 22 bytes besides the names
	for _, tc := range []struct {
		name           string
		job, partition string
		long           bool
	}{
		{"short", "settle", "eu", false},
		{"exactly the limit", strings.Repeat("j", MaxIdempotencyKeyLen-fixed-5), "ppppp", false},
		{"one byte over", strings.Repeat("j", MaxIdempotencyKeyLen-fixed-5), "pppppp", true},
		{"longest job and partition", strings.Repeat("j", 200), strings.Repeat("p", 48), true},
		{"escapes make it long", strings.Repeat("ü", 60), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Slot{Job: tc.job, At: at, Partition: tc.partition}
			full, got := s.Key(), s.IdempotencyKey()
			if !tc.long {
				if got != full || len(got) > MaxIdempotencyKeyLen {
					t.Fatalf("IdempotencyKey = %q (%d bytes), want Key %q", got, len(got), full)
				}
				return
			}
			if len(full) <= MaxIdempotencyKeyLen {
				t.Fatalf("Key of %d bytes: the case does not test a long key", len(full))
			}
			sum := sha256.Sum256([]byte(full))
			want := full[:MaxIdempotencyKeyLen-len(longKeyMark)-2*sha256.Size] + longKeyMark + hex.EncodeToString(sum[:])
			if got != want || len(got) != MaxIdempotencyKeyLen {
				t.Fatalf("IdempotencyKey = %q (%d bytes), want %q", got, len(got), want)
			}
			for i := 0; i < len(got); i++ {
				if got[i] < 0x20 || got[i] > 0x7e {
					t.Fatalf("byte %#x of %q is not printable ASCII", got[i], got)
				}
			}
		})
	}
	// Stable across builds: downstream stores keep it.
	s := Slot{Job: strings.Repeat("j", 200), At: at, Partition: strings.Repeat("p", 48)}
	// The hash is sha256sum of the 270-byte Key, computed outside Go.
	const pinned = "%#d2375e7ac87bb90eb87a87833aab6a56dc7415b1ed5410a351f388e93276ad27"
	if k := s.IdempotencyKey(); k != strings.Repeat("j", 189)+pinned {
		t.Fatalf("IdempotencyKey %q changed: stored keys downstream would no longer match", k)
	}
}

// No short key is a long key: a short key holds '%' only before two
// upper-case hex digits, so never the long form's mark "%#". Long keys of
// slots that share their first bytes differ in the hash; short keys are
// injective (TestSlotKeyIsInjective).
func TestSlotIdempotencyKeyIsInjective(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_780_000_000, 0).UTC()
	seen := map[string]Slot{}
	base := strings.Repeat("j", 200)
	for _, job := range []string{base, base[:199] + "k", base[:190] + "%#", base[:190] + "%23", strings.Repeat("j", 180), "a"} {
		for _, p := range []string{"", "p", "q", strings.Repeat("p", 48), strings.Repeat("p", 47) + "q", "%#", "%", "%23" + strings.Repeat("0", 45)} {
			for _, sec := range []int64{0, 1} {
				s := Slot{Job: job, At: at.Add(time.Duration(sec) * time.Second), Partition: p}
				k := s.IdempotencyKey()
				if len(k) > MaxIdempotencyKeyLen {
					t.Fatalf("%+v: key of %d bytes", s, len(k))
				}
				if long := strings.Contains(k, longKeyMark); long != (len(s.Key()) > MaxIdempotencyKeyLen) {
					t.Fatalf("%+v: key %q holds the long mark: %v, Key is %d bytes", s, k, long, len(s.Key()))
				}
				if prev, ok := seen[k]; ok && prev != s {
					t.Fatalf("slots %+v and %+v share the key %q", prev, s, k)
				}
				seen[k] = s
			}
		}
	}
}

func FuzzSlotIdempotencyKey(f *testing.F) {
	f.Add(strings.Repeat("j", 200), strings.Repeat("p", 48))
	f.Add("settle", "eu")
	f.Add("%#", "%")
	f.Fuzz(func(t *testing.T, job, partition string) {
		s := Slot{Job: job, At: time.Unix(1_780_000_000, 0).UTC(), Partition: partition}
		full, k := s.Key(), s.IdempotencyKey()
		switch {
		case len(k) > MaxIdempotencyKeyLen:
			t.Fatalf("key of %d bytes", len(k))
		case len(full) <= MaxIdempotencyKeyLen && k != full:
			t.Fatalf("short Key %q became %q", full, k)
		case len(full) <= MaxIdempotencyKeyLen && strings.Contains(k, longKeyMark):
			t.Fatalf("short Key %q holds the long mark", full)
		case len(full) > MaxIdempotencyKeyLen && !strings.Contains(k, longKeyMark):
			t.Fatalf("long Key %q gave %q without the mark", full, k)
		}
	})
}
