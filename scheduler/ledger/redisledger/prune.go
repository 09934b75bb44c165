package redisledger

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
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
// with that error. A cutoff later than Redis's clock (TIME) minus
// ledger.PruneMargin is refused first (*ledger.PruneCutoffError), with
// nothing changed.
func (l *Ledger) Prune(ctx context.Context, before time.Time) (int64, error) {
	if ctx == nil {
		return 0, nilContext("Prune")
	}
	if err := l.checkFormatRead(ctx); err != nil {
		return 0, err
	}
	if err := l.checkCutoff(ctx, before); err != nil {
		return 0, err
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

// checkCutoff refuses a prune cutoff later than Redis's clock (TIME, one
// round trip; on a Cluster, any node's) minus ledger.PruneMargin: the
// store's clock, not the caller's, so that a caller whose clock is ahead
// cannot close slots still to run.
func (l *Ledger) checkCutoff(ctx context.Context, before time.Time) error {
	now, err := l.rdb.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("redisledger: prune: read the server's clock: %w", err)
	}
	return ledger.CheckPruneCutoff(before, now)
}

// prunedMember is the one member of a pair's pruned zset (ledgerKeys).
const prunedMember = "cutoff"

// prunePair prunes one pair, a batch at a time, from its oldest slot. It
// first raises the pair's pruned cutoff (State.Pruned) to before, so that
// no record is gone before the cutoff says it may be.
func (l *Ledger) prunePair(ctx context.Context, k ledgerKeys, before time.Time) (int64, error) {
	if err := l.rdb.ZAddGT(ctx, k.pruned, redis.Z{Score: float64(before.Unix()), Member: prunedMember}).Err(); err != nil {
		return 0, err
	}
	var deleted int64
	from := "-inf"
	for {
		slots, err := l.rdb.ZRangeByScore(ctx, k.index, &redis.ZRangeBy{
			Min: from, Max: "(" + unix(before), Count: PruneBatch,
		}).Result()
		if err != nil || len(slots) == 0 {
			return deleted, err
		}
		keys, args := pruneArgs(k, "delete", slots)
		n, err := pruneScript.Run(ctx, l.rdb, keys, args...).Int64()
		deleted += n
		if err != nil || len(slots) < PruneBatch {
			return deleted, err
		}
		from = "(" + slots[len(slots)-1]
	}
}

// pruneArgs is the keys and arguments of scripts/prune.lua for slots of
// the pair k in mode ("delete" or "list").
func pruneArgs(k ledgerKeys, mode string, slots []string) ([]string, []any) {
	keys := make([]string, 0, 4+len(slots))
	keys = append(keys, k.index, k.open, k.pending, k.unit)
	args := make([]any, 0, 1+len(slots))
	args = append(args, mode)
	for _, s := range slots {
		keys = append(keys, k.base+"run:"+s)
		args = append(args, s)
	}
	return keys, args
}

var _ ledger.PrunePreviewer = (*Ledger)(nil)

// PrunePreview implements ledger.PrunePreviewer: it walks the pairs and
// batches as Prune does, with scripts/prune.lua in its "list" mode, which
// applies the same rule and writes nothing. It returns at most limit
// slots, a pair's oldest first, and the count of all. It refuses a
// cutoff as Prune does.
func (l *Ledger) PrunePreview(ctx context.Context, before time.Time, limit int) ([]ledger.Slot, int64, error) {
	if ctx == nil {
		return nil, 0, nilContext("PrunePreview")
	}
	if err := l.checkFormatRead(ctx); err != nil {
		return nil, 0, err
	}
	if err := l.checkCutoff(ctx, before); err != nil {
		return nil, 0, err
	}
	bases, err := l.pairBases(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("redisledger: prune preview: %w", err)
	}
	var out []ledger.Slot
	var total int64
	for _, base := range bases {
		job, partition, ok := l.pairOf(base)
		if !ok {
			continue
		}
		k := keysAt(base)
		from := "-inf"
		for {
			slots, err := l.rdb.ZRangeByScore(ctx, k.index, &redis.ZRangeBy{
				Min: from, Max: "(" + unix(before), Count: PruneBatch,
			}).Result()
			if err != nil {
				return out, total, fmt.Errorf("redisledger: prune preview %s: %w", base, err)
			}
			if len(slots) == 0 {
				break
			}
			keys, args := pruneArgs(k, "list", slots)
			would, err := pruneScript.Run(ctx, l.rdb, keys, args...).StringSlice()
			if err != nil {
				return out, total, fmt.Errorf("redisledger: prune preview %s: %w", base, err)
			}
			total += int64(len(would))
			for _, w := range would {
				sec, err := strconv.ParseInt(w, 10, 64)
				if err == nil && len(out) < limit {
					out = append(out, ledger.Slot{Job: job, At: time.Unix(sec, 0).UTC(), Partition: partition})
				}
			}
			if len(slots) < PruneBatch {
				break
			}
			from = "(" + slots[len(slots)-1]
		}
	}
	return out, total, nil
}

// pairOf reads (job, partition) back from a pair's key base,
// "<prefix>{<ledger.UnitScope(job, partition)>}:" (a job name holds no
// '|', '{' or '}').
func (l *Ledger) pairOf(base string) (job, partition string, ok bool) {
	scope, found := strings.CutPrefix(base, l.prefix+"{")
	if !found {
		return "", "", false
	}
	scope, found = strings.CutSuffix(scope, "}:")
	if !found {
		return "", "", false
	}
	job, partition, _ = strings.Cut(scope, ledger.PartitionSep)
	return job, partition, true
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
