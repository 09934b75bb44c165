package sim

import (
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
