// Command leaseir counts the Redis server's instructions per acquire and
// release of a free lease, for each of leasebench's contenders
// (bench.New: holdfast, ideal, redsync, redislock, ideal_floor), on one
// redis-server of its own under valgrind's callgrind (bench.Callgrind;
// without valgrind it prints a line saying so and exits 0). One
// goroutine, one key, -ops (1,000) acquire+release pairs per contender
// after 10 not counted: leasebench's uncontended_1, whose figures are
// Redis-bound, counted rather than timed, so that a busy or a slow host
// gives the same figure. It prints
//
//	bench: lease_instructions holdfast=<n> ideal=<n> redsync=<n> redislock=<n> ideal_floor=<n> ratio_vs_ideal=<x.xx> ratio_vs_ideal_floor=<x.xx>
//
// the instructions per acquire+release, and the ratios as leasebench's
// (a contender's ops/s over another's: here the other's count over
// holdfast's). Run it from bench/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench"
)

func main() {
	ops := flag.Int("ops", 1000, "acquire+release pairs counted per contender")
	flag.Parse()
	if bin := bench.CallgrindMissing(); bin != "" {
		fmt.Printf("bench: lease_instructions skipped (%s not on PATH)\n", bin)
		return
	}
	if err := run(*ops); err != nil {
		fmt.Fprintln(os.Stderr, "leaseir:", err)
		os.Exit(1)
	}
}

func run(ops int) error {
	if ops < 1 {
		return errors.New("-ops must be positive")
	}
	ctx := context.Background()
	s, err := bench.StartCallgrind(ctx, false)
	if err != nil {
		return err
	}
	defer s.Close()
	cs, err := bench.New(s.Client, "leaseir:", time.Minute)
	if err != nil {
		return err
	}
	per := map[string]float64{}
	var line []string
	for _, c := range cs {
		w := c.Worker("k")
		if err := pairs(ctx, w, 10); err != nil {
			return fmt.Errorf("%s: %w", c.Name(), err)
		}
		if err := s.Zero(); err != nil {
			return err
		}
		if err := pairs(ctx, w, ops); err != nil {
			return fmt.Errorf("%s: %w", c.Name(), err)
		}
		n, err := s.Count()
		if err != nil {
			return err
		}
		per[c.Name()] = float64(n) / float64(ops)
		line = append(line, fmt.Sprintf("%s=%.0f", c.Name(), per[c.Name()]))
	}
	fmt.Printf("bench: lease_instructions %s ratio_vs_ideal=%.2f ratio_vs_ideal_floor=%.2f\n", strings.Join(line, " "),
		per["ideal"]/per["holdfast"], per["ideal_floor"]/per["holdfast"])
	return nil
}

// pairs makes n acquire+release pairs of w's free lease.
func pairs(ctx context.Context, w bench.Worker, n int) error {
	for range n {
		ok, err := w.Acquire(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("a free lease was not acquired")
		}
		if err := w.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}
