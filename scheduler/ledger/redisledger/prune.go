package redisledger

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// PruneBatch is how many slots of one (job, partition) one prune script
// looks at (500): the script is atomic, so a batch bounds how long it
// blocks Redis.
const PruneBatch = 500

var (
	//go:embed scripts/prune.lua
	pruneSrc    string
	pruneScript = luascript.New(pruneSrc)
)

var _ ledger.Pruner = (*Ledger)(nil)

// Prune implements ledger.Pruner. It finds every (job, partition) of the
// ledger by SCAN of its index keys (on every master of a Cluster), then
// walks each pair's index of slots before before, PruneBatch slots per
// round trip: one read of the index, then one script (scripts/prune.lua,
// keys of the pair's hash tag only) that deletes the run hashes of the
// done slots among them and their index entries. It keeps every open,
// pending or retryable slot, the pair's last slot (State.Last), the
// fences (fence, fence:<unix>), the horizon, the cancel mark and the pause
// flag. It returns the records deleted until an error or the end of ctx,
// with that error.
func (l *Ledger) Prune(ctx context.Context, before time.Time) (int64, error) {
	if ctx == nil {
		return 0, nilContext("Prune")
	}
	bases, err := l.pairBases(ctx)
	if err != nil {
		return 0, fmt.Errorf("redisledger: prune: %w", err)
	}
	var deleted int64
	for _, base := range bases {
		n, err := l.prunePair(ctx, keysAt(base), before)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("redisledger: prune %s: %w", base, err)
		}
	}
	return deleted, nil
}

// prunePair prunes one pair, a batch at a time, from its oldest slot.
func (l *Ledger) prunePair(ctx context.Context, k ledgerKeys, before time.Time) (int64, error) {
	var deleted int64
	from := "-inf"
	for {
		slots, err := l.rdb.ZRangeByScore(ctx, k.index, &redis.ZRangeBy{
			Min: from, Max: "(" + unix(before), Count: PruneBatch,
		}).Result()
		if err != nil || len(slots) == 0 {
			return deleted, err
		}
		keys := make([]string, 0, 4+len(slots))
		keys = append(keys, k.index, k.open, k.pending, k.last)
		args := make([]any, len(slots))
		for i, s := range slots {
			keys = append(keys, k.base+"run:"+s)
			args[i] = s
		}
		n, err := pruneScript.Run(ctx, l.rdb, keys, args...).Int64()
		deleted += n
		if err != nil || len(slots) < PruneBatch {
			return deleted, err
		}
		from = "(" + slots[len(slots)-1]
	}
}

// pairBases returns the key base ("<prefix>{job|partition}:") of every
// pair with an index, scanning every master of a Cluster.
func (l *Ledger) pairBases(ctx context.Context) ([]string, error) {
	match := globEscape(l.prefix) + "{*}:index"
	var (
		mu    sync.Mutex
		bases []string
	)
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		it := c.Scan(ctx, 0, match, PruneBatch).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			bases = append(bases, strings.TrimSuffix(it.Val(), "index"))
			mu.Unlock()
		}
		return it.Err()
	}
	if cc, ok := l.rdb.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
		return bases, err
	}
	return bases, scan(ctx, l.rdb)
}

// globEscape quotes the glob metacharacters of s for SCAN MATCH.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}
