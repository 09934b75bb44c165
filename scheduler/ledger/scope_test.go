package ledger

import (
	"errors"
	"testing"
	"time"
)

// Lease names are injective over names without the separators: every
// (job, partition) and every slot of small names over an alphabet with
// the other punctuation Key uses gets a scope of its own.
func TestScopesAreInjective(t *testing.T) {
	t.Parallel()
	alphabet := []string{"a", "b", ":", "-", "1"}
	var names []string
	for _, x := range append([]string{""}, alphabet...) {
		for _, y := range alphabet {
			names = append(names, x+y)
		}
	}
	names = append(names, alphabet...)
	owner := map[string]string{}
	claim := func(scope, who string) {
		if prev, ok := owner[scope]; ok && prev != who {
			t.Fatalf("scope %q is both %s and %s", scope, prev, who)
		}
		owner[scope] = who
	}
	for _, job := range names {
		for _, p := range append([]string{""}, names...) {
			claim(UnitScope(job, p), "unit "+job+"/"+p)
			for _, at := range []int64{0, 1, 11, 1_780_000_000} {
				s := Slot{Job: job, At: time.Unix(at, 0), Partition: p}
				claim(SlotScope(s), "slot "+s.Key())
			}
		}
	}
	// With the separator in a name, two leases would share one scope: the
	// reason the scheduler refuses them.
	if SlotScope(Slot{Job: "a", At: time.Unix(1_780_000_000, 0)}) != UnitScope("a@1780000000", "") {
		t.Fatal("the collision the separators rule out did not happen")
	}
}

func TestSlotScoped(t *testing.T) {
	t.Parallel()
	s := Slot{Job: "settle", At: time.Unix(1_780_000_000, 0), Partition: "eu"}
	for scope, want := range map[string]bool{"settle|eu": false, "settle|eu@1780000000": true} {
		got, err := SlotScoped(s, scope)
		if err != nil || got != want {
			t.Fatalf("SlotScoped(%q) = %v, %v; want %v, nil", scope, got, err, want)
		}
	}
	for _, scope := range []string{"", "settle", "settle|us", "settle|eu@1780000001", "settle|eu@"} {
		if _, err := SlotScoped(s, scope); !errors.Is(err, ErrUnknownScope) {
			t.Fatalf("SlotScoped(%q) = %v, want ErrUnknownScope", scope, err)
		}
	}
}

// isUnitScope is scope == UnitScope(job, partition), without building the
// name: checked on every pair of small names over an alphabet holding the
// separator, against every scope built from them.
func TestIsUnitScopeIsUnitScopeEquality(t *testing.T) {
	t.Parallel()
	alphabet := []string{"", "a", "b", "|", "a|", "|b", "ab", "a|b"}
	var scopes []string
	for _, x := range alphabet {
		for _, y := range alphabet {
			scopes = append(scopes, x+y, x+"|"+y, x+"||"+y)
		}
	}
	for _, job := range alphabet {
		for _, p := range alphabet {
			for _, scope := range scopes {
				if got, want := isUnitScope(scope, job, p), scope == UnitScope(job, p); got != want {
					t.Fatalf("isUnitScope(%q, %q, %q) = %v, want %v", scope, job, p, got, want)
				}
			}
		}
	}
}

// SlotScoped of the unit scope allocates nothing (not parallel:
// AllocsPerRun counts the whole process's allocations).
func TestSlotScopedOfTheUnitScopeAllocatesNothing(t *testing.T) {
	s := Slot{Job: "settle", At: time.Unix(1_780_000_000, 0), Partition: "eu"}
	if n := testing.AllocsPerRun(100, func() { _, _ = SlotScoped(s, "settle|eu") }); n != 0 {
		t.Fatalf("SlotScoped of the unit scope: %v allocations, want 0", n)
	}
}
