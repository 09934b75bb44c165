package scheduler

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
)

// DefaultLedgerPrefix starts every key of a RedisLedger.
const DefaultLedgerPrefix = "holdfast:ledger:"

var (
	//go:embed scripts/begin.lua
	beginSrc    string
	beginScript = redis.NewScript(beginSrc)

	//go:embed scripts/finish.lua
	finishSrc    string
	finishScript = redis.NewScript(finishSrc)
)

// RedisLedger is the default Ledger. The records of one (job, partition)
// share the hash tag {job|partition}, so it works on Redis Cluster; every
// transition is one Lua script that checks and raises the fence.
type RedisLedger struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewRedisLedger returns a ledger over rdb with keys under prefix (default
// DefaultLedgerPrefix). It returns ErrInvalidConfig for a nil rdb or a
// prefix holding '{' or '}'.
func NewRedisLedger(rdb redis.UniversalClient, prefix string) (*RedisLedger, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	}
	if prefix == "" {
		prefix = DefaultLedgerPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("%w: ledger prefix %q holds '{' or '}'", ErrInvalidConfig, prefix)
	}
	return &RedisLedger{rdb: rdb, prefix: prefix}, nil
}

func (l *RedisLedger) base(job, partition string) string {
	return l.prefix + "{" + job + "|" + partition + "}"
}

func (l *RedisLedger) keys(s Slot) []string {
	b := l.base(s.Job, s.Partition)
	return []string{b + ":fence", b + ":run:" + strconv.FormatInt(s.At.Unix(), 10), b + ":open", b + ":last"}
}

// Outstanding implements Ledger.
func (l *RedisLedger) Outstanding(ctx context.Context, job, partition string, since time.Time) ([]time.Time, time.Time, error) {
	b := l.base(job, partition)
	pipe := l.rdb.Pipeline()
	openCmd := pipe.ZRangeByScore(ctx, b+":open", &redis.ZRangeBy{Min: strconv.FormatInt(since.Unix(), 10), Max: "+inf"})
	lastCmd := pipe.Get(ctx, b+":last")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, time.Time{}, fmt.Errorf("scheduler: ledger outstanding %s: %w", job, err)
	}
	var open []time.Time
	for _, v := range openCmd.Val() {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("scheduler: ledger outstanding %s: bad member %q", job, v)
		}
		open = append(open, time.Unix(sec, 0).UTC())
	}
	var last time.Time
	if v, err := lastCmd.Int64(); err == nil {
		last = time.Unix(v, 0).UTC()
	}
	return open, last, nil
}

// Begin implements Ledger.
func (l *RedisLedger) Begin(ctx context.Context, s Slot, token fence.Token, owner string, maxAttempts int) (int, error) {
	res, err := beginScript.Run(ctx, l.rdb, l.keys(s), token.String(), owner, s.At.Unix(), time.Now().UnixMilli(), max(maxAttempts, 1)).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("scheduler: ledger begin %s: %w", s.Key(), err)
	}
	switch res[0] {
	case 1:
		return int(res[1]), nil
	case 0:
		return 0, ErrSlotDone
	default:
		return 0, &fence.StaleTokenError{Resource: "ledger:" + s.Key(), Presented: token, Current: fence.Token(res[1])}
	}
}

// Finish implements Ledger.
func (l *RedisLedger) Finish(ctx context.Context, s Slot, token fence.Token, owner string, attempt int, status Status, errText string, final bool) error {
	f := "0"
	if final {
		f = "1"
	}
	res, err := finishScript.Run(ctx, l.rdb, l.keys(s)[:3], token.String(), owner, s.At.Unix(), attempt, string(status), errText, time.Now().UnixMilli(), f).Int64Slice()
	if err != nil {
		return fmt.Errorf("scheduler: ledger finish %s: %w", s.Key(), err)
	}
	if res[0] != 1 {
		return &fence.StaleTokenError{Resource: "ledger:" + s.Key(), Presented: token, Current: fence.Token(res[1])}
	}
	return nil
}

// Get returns the record of slot; found is false when the ledger has none.
func (l *RedisLedger) Get(ctx context.Context, s Slot) (rec Record, found bool, err error) {
	m, err := l.rdb.HGetAll(ctx, l.keys(s)[1]).Result()
	if err != nil {
		return Record{}, false, fmt.Errorf("scheduler: ledger get %s: %w", s.Key(), err)
	}
	if len(m) == 0 {
		return Record{Slot: s}, false, nil
	}
	rec = Record{Slot: s, Status: Status(m["status"]), Owner: m["owner"], LastError: m["error"]}
	rec.Attempt, _ = strconv.Atoi(m["attempt"])
	tok, _ := strconv.ParseUint(m["token"], 10, 64)
	rec.Token = fence.Token(tok)
	if ms, err := strconv.ParseInt(m["started"], 10, 64); err == nil {
		rec.Started = time.UnixMilli(ms).UTC()
	}
	if ms, err := strconv.ParseInt(m["finished"], 10, 64); err == nil {
		rec.Finished = time.UnixMilli(ms).UTC()
	}
	return rec, true, nil
}
