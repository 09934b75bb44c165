package ledger

import (
	"testing"
	"time"
)

// Key is printable ASCII and injective; ASCII names keep their key.
func TestSlotKey(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 8, 7, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, tc := range []struct{ job, partition, want string }{
		{"settle", "", "settle:2026-03-08T06:00:00Z:"},
		{"settle", "eu", "settle:2026-03-08T06:00:00Z:eu"},
		{"nightly report", "a:b", "nightly report:2026-03-08T06:00:00Z:a:b"},
		{"settle", "zürich", "settle:2026-03-08T06:00:00Z:z%C3%BCrich"},
		{"Größe", "東京", "Gr%C3%B6%C3%9Fe:2026-03-08T06:00:00Z:%E6%9D%B1%E4%BA%AC"},
		{"100%", "50%", "100%25:2026-03-08T06:00:00Z:50%25"},
		{"billing:daily", "", "billing%3Adaily:2026-03-08T06:00:00Z:"},
		{"tab\tjob", "del\x7f", "tab%09job:2026-03-08T06:00:00Z:del%7F"},
	} {
		got := Slot{Job: tc.job, At: at, Partition: tc.partition}.Key()
		if got != tc.want {
			t.Errorf("Key(%q, %q) = %q, want %q", tc.job, tc.partition, got, tc.want)
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x20 || got[i] > 0x7e {
				t.Errorf("Key(%q, %q) = %q: byte %#x is not printable ASCII", tc.job, tc.partition, got, got[i])
			}
		}
	}
}

// No two slots share a key: not a job whose name holds a ':' and a
// timestamp, nor a name holding the escape of another.
func TestSlotKeyIsInjective(t *testing.T) {
	t.Parallel()
	t0, t1 := time.Unix(1_780_000_000, 0).UTC(), time.Unix(1_780_000_001, 0).UTC()
	ts := t0.Format(time.RFC3339)
	pieces := []string{"", "a", ":", "%", "%25", "%3A", "ü", "%C3%BC", ":" + ts + ":", "a:" + ts, "Z:"}
	seen := map[string]Slot{}
	for _, x := range pieces {
		for _, y := range pieces {
			job := x + y
			if job == "" {
				continue
			}
			for _, p1 := range pieces {
				for _, p2 := range pieces {
					for _, at := range []time.Time{t0, t1} {
						s := Slot{Job: job, At: at, Partition: p1 + p2}
						k := s.Key()
						if prev, ok := seen[k]; ok && prev != s {
							t.Fatalf("slots %+v and %+v share the key %q", prev, s, k)
						}
						seen[k] = s
					}
				}
			}
		}
	}
}
