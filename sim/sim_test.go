package sim

import (
	"strings"
	"testing"
	"testing/synctest"
)

// runSeed runs cfg in a bubble of its own.
func runSeed(t *testing.T, cfg Config) Result {
	t.Helper()
	var res Result
	synctest.Test(t, func(t *testing.T) {
		var err error
		res, err = Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
	})
	return res
}

func TestOneSeed(t *testing.T) {
	res := runSeed(t, Config{Seed: 1, Steps: 120})
	t.Logf("%+v", res)
	for _, v := range res.Violations {
		t.Log(v)
	}
}

func TestManySeedsScratch(t *testing.T) {
	for seed := uint64(1); seed <= 150; seed++ {
		res := runSeed(t, Config{Seed: seed, Steps: 300, WildClocks: false})
		t.Logf("seed=%d replicas=%d slots=%d faults=%d effects=%d violations=%d", seed, res.Replicas, res.Slots, res.Faults, res.Effects, len(res.Violations))
		for i, v := range res.Violations {
			if i < 5 {
				t.Log(v)
			}
		}
	}
}

func TestDumpScratch(t *testing.T) {
	res := runSeed(t, Config{Seed: 25, Steps: 300, WildClocks: false, debug: func(l string) {
		if strings.Contains(l, "@00:01:5") {
			t.Log(l)
		}
	}})
	for _, l := range res.Trace {
		if !strings.Contains(l, "checked=") {
			t.Log(l)
		}
	}
}
