package bench

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/redisproc"
)

// TestFloorSlots: a Floor run one slot at a time writes what LayoutFloor
// writes for the same slots (v2: per unit, the unit hash, the lease
// counter, the index and a run hash per slot; the lease is released) and
// measures some server CPU for each slot's claim and finish.
func TestFloorSlots(t *testing.T) {
	s := redisproc.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	const units = 300 // two script calls of 256 and 44 units
	f, err := NewFloor(rdb, "f:", "v2", units)
	if err != nil {
		t.Fatal(err)
	}
	for slot, want := range []int64{4 * units, 5 * units} {
		got, err := f.Slot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.Keys != want {
			t.Errorf("slot %d: %d keys, want %d", slot+1, got.Keys, want)
		}
		if got.Claim <= 0 || got.Finish <= 0 {
			t.Errorf("slot %d: claim %v, finish %v: want both > 0", slot+1, got.Claim, got.Finish)
		}
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	all, err := LayoutFloor(ctx, rdb, "f:", "v2", units, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Keys != 4*units || all[1].Keys != 5*units {
		t.Errorf("LayoutFloor: %+v, want 2 slots of %d and %d keys", all, 4*units, 5*units)
	}
	if _, err := NewFloor(rdb, "f:", "v3", units); err == nil {
		t.Error("NewFloor with layout v3: nil error")
	}
}
