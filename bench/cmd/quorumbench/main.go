// Command quorumbench measures holdfast's quorum lease (lease/quorum over N
// independent Redis masters, with its fencing token) against a bare
// go-redsync/redsync Mutex on the same masters: one goroutine taking a free
// lock and freeing it, the two interleaved round by round, and prints
//
//	bench: quorum holdfast=<ops/s> redsync=<ops/s> ratio=<x.xx>
//	bench: quorum_raise holdfast=<ops/s> redsync=<ops/s> ratio=<x.xx>
//
// with each contender's median over the rounds, and ratio = holdfast /
// redsync. The second line is holdfast without token proposals
// (quorum.Options.TokenLead -1): the masters' own clocks, rounded up to
// 10 ms, and counters decide the candidates, and an acquisition takes the
// token's raise round trip when they disagree (a 10 ms step boundary
// between the masters' scripts, or counters set apart).
//
// By default it starts 5 redis-server processes (from PATH) on free
// loopback ports, without persistence, and kills them at the end; -masters
// takes a comma-separated list of host:port instead.
//
//	go run ./cmd/quorumbench [-rounds 11] [-ops 1000] [-masters a:6379,b:6379,c:6379] [-v]
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/quorum"
)

type config struct {
	masters string
	nodes   int
	rounds  int
	ops     int
	ttl     time.Duration
	verbose bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.masters, "masters", "", "comma-separated host:port of the masters (default: start -nodes redis-servers)")
	flag.IntVar(&cfg.nodes, "nodes", 5, "redis-servers to start when -masters is empty")
	flag.IntVar(&cfg.rounds, "rounds", 11, "interleaved rounds; the median is printed")
	flag.IntVar(&cfg.ops, "ops", 1000, "acquire+release operations per contender per round")
	flag.DurationVar(&cfg.ttl, "ttl", 10*time.Second, "lease TTL")
	flag.BoolVar(&cfg.verbose, "v", false, "print every round to stderr")
	flag.Parse()
	if err := run(cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "quorumbench:", err)
		os.Exit(1)
	}
}

// contender runs one acquire+release.
type contender struct {
	name string
	op   func(ctx context.Context) error
}

func run(cfg config, stdout, stderr io.Writer) (err error) {
	if cfg.rounds < 1 || cfg.ops < 1 {
		return errors.New("-rounds and -ops must be positive")
	}
	addrs := splitAddrs(cfg.masters)
	if len(addrs) == 0 {
		for range cfg.nodes {
			s, err := redisproc.Launch()
			if err != nil {
				return fmt.Errorf("%w (install redis-server, or pass -masters)", err)
			}
			defer s.Close()
			addrs = append(addrs, s.Addr())
		}
	}
	ctx := context.Background()
	masters := make([]redis.UniversalClient, len(addrs))
	for i, addr := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("master %s: %w", addr, err)
		}
		masters[i] = rdb
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	prefix := "holdfast-quorumbench:" + hex.EncodeToString(id[:]) + ":"
	defer func() {
		for _, rdb := range masters {
			err = errors.Join(err, deleteUnder(context.WithoutCancel(ctx), rdb, prefix))
		}
	}()

	contenders, err := newContenders(masters, prefix, cfg.ttl)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# quorumbench %s GOMAXPROCS=%d masters=%d rounds=%d ops=%d ttl=%v\n",
		runtime.Version(), runtime.GOMAXPROCS(0), len(masters), cfg.rounds, cfg.ops, cfg.ttl)

	// One warm-up round, then rounds whose order rotates, so that load
	// from other processes falls on every contender alike.
	rates := make([][]float64, len(contenders))
	for round := -1; round < cfg.rounds; round++ {
		for k := range contenders {
			i := (k + max(round, 0)) % len(contenders)
			c := contenders[i]
			start := time.Now()
			for range cfg.ops {
				if err := c.op(ctx); err != nil {
					return fmt.Errorf("%s: %w", c.name, err)
				}
			}
			rate := float64(cfg.ops) / time.Since(start).Seconds()
			if round >= 0 {
				rates[i] = append(rates[i], rate)
			}
			if cfg.verbose {
				fmt.Fprintf(stderr, "# round %d %s %.0f ops/s\n", round, c.name, rate)
			}
		}
	}
	hf, rs, raise := median(rates[0]), median(rates[1]), median(rates[2])
	fmt.Fprintf(stdout, "bench: quorum holdfast=%.0f redsync=%.0f ratio=%.2f\n", hf, rs, hf/rs)
	fmt.Fprintf(stdout, "bench: quorum_raise holdfast=%.0f redsync=%.0f ratio=%.2f\n", raise, rs, raise/rs)
	return nil
}

func newContenders(masters []redis.UniversalClient, prefix string, ttl time.Duration) ([]contender, error) {
	holdfast, err := newHoldfast(masters, prefix+"holdfast:", ttl, quorum.Options{})
	if err != nil {
		return nil, err
	}
	raise, err := newHoldfast(masters, prefix+"raise:", ttl, quorum.Options{TokenLead: -1})
	if err != nil {
		return nil, err
	}
	pools := make([]redsyncredis.Pool, len(masters))
	for i, rdb := range masters {
		pools[i] = goredis.NewPool(rdb)
	}
	mu := redsync.New(pools...).NewMutex(prefix+"redsync:{bench}", redsync.WithExpiry(ttl), redsync.WithTries(1))
	bare := func(ctx context.Context) error {
		if err := mu.TryLockContext(ctx); err != nil {
			return err
		}
		if ok, err := mu.UnlockContext(ctx); !ok {
			return fmt.Errorf("unlock: %w", err)
		}
		return nil
	}
	return []contender{{"holdfast", holdfast}, {"redsync", bare}, {"holdfast_raise", raise}}, nil
}

// newHoldfast returns acquire+release on a lease.Client over the quorum
// backend.
func newHoldfast(masters []redis.UniversalClient, prefix string, ttl time.Duration, opts quorum.Options) (func(context.Context) error, error) {
	opts.Prefix = prefix
	backend, err := quorum.New(masters, opts)
	if err != nil {
		return nil, err
	}
	client, err := lease.NewWithBackend(backend, lease.Options{})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		l, err := client.TryAcquire(ctx, "bench", ttl)
		if err != nil {
			return err
		}
		if l.Token() == 0 {
			return errors.New("no token")
		}
		return l.Release(ctx)
	}, nil
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func splitAddrs(s string) []string {
	var out []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// deleteUnder deletes the keys under prefix on one master.
func deleteUnder(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}
