package redisfence_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
	"github.com/holdfast-go/holdfast/sinks/sinktest"
)

// setSink adapts Writer.Set to the conformance suite: one resource is one
// string key under the test's prefix.
type setSink struct {
	rdb    redis.UniversalClient
	w      *redisfence.Writer
	prefix string
}

func (s *setSink) Write(ctx context.Context, resource string, t fence.Token, owner, value string) error {
	return s.WriteScoped(ctx, resource, fence.Holder{Token: t, Owner: owner}, value)
}

// WriteScoped makes the adapters sinktest.ScopedWriters, and with
// PruneSlotScopes sinktest.SlotScopeSinks: Exercise runs ScopesAreIndependent
// and SlotScopesClose on them.
func (s *setSink) WriteScoped(ctx context.Context, resource string, h fence.Holder, value string) error {
	return suiteError(s.w.Set(ctx, s.prefix+resource, value, h, time.Hour), s.prefix+resource, resource)
}

func (s *setSink) PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error) {
	return s.w.PruneSlotScopes(ctx, s.prefix+resource, unit, before)
}

// Read gets the value and the fence token in one MULTI/EXEC, so both come
// from one instant.
func (s *setSink) Read(ctx context.Context, resource string) (string, fence.Token, error) {
	return readPair(ctx, s.rdb, s.prefix+resource, func(p redis.Pipeliner, key string) *redis.StringCmd { return p.Get(ctx, key) })
}

// hsetSink adapts Writer.HSet: the value is field "v" of a hash.
type hsetSink struct{ setSink }

func (s *hsetSink) Write(ctx context.Context, resource string, t fence.Token, owner, value string) error {
	return s.WriteScoped(ctx, resource, fence.Holder{Token: t, Owner: owner}, value)
}

func (s *hsetSink) WriteScoped(ctx context.Context, resource string, h fence.Holder, value string) error {
	return suiteError(s.w.HSet(ctx, s.prefix+resource, map[string]string{"v": value}, h), s.prefix+resource, resource)
}

func (s *hsetSink) Read(ctx context.Context, resource string) (string, fence.Token, error) {
	return readPair(ctx, s.rdb, s.prefix+resource, func(p redis.Pipeliner, key string) *redis.StringCmd { return p.HGet(ctx, key, "v") })
}

// evalSink adapts Writer.Eval with a caller script that appends to a log
// and sets the value: the body runs only when the fence passes.
type evalSink struct{ setSink }

var appendAndSet = redisfence.NewScript(`
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[1])
return redis.call('LLEN', KEYS[2])`)

func (s *evalSink) Write(ctx context.Context, resource string, t fence.Token, owner, value string) error {
	return s.WriteScoped(ctx, resource, fence.Holder{Token: t, Owner: owner}, value)
}

func (s *evalSink) WriteScoped(ctx context.Context, resource string, h fence.Holder, value string) error {
	key := s.prefix + "{" + resource + "}"
	n, err := s.w.Eval(ctx, appendAndSet, []string{key, key + ":log"}, h, value)
	if err == nil && n == nil {
		return errors.New("the body's return value was lost")
	}
	return suiteError(err, key, resource)
}

func (s *evalSink) PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error) {
	return s.w.PruneSlotScopes(ctx, s.prefix+"{"+resource+"}", unit, before)
}

func (s *evalSink) Read(ctx context.Context, resource string) (string, fence.Token, error) {
	return readPair(ctx, s.rdb, s.prefix+"{"+resource+"}", func(p redis.Pipeliner, key string) *redis.StringCmd { return p.Get(ctx, key) })
}

// suiteError names the resource of a refusal as the suite named it: the
// Writer's *fence.StaleTokenError names the key written (the test's prefix,
// Eval's braces, the resource), and SlotScopesClose compares names
// exactly. Only a refusal naming exactly key is renamed, so a Writer that
// named another key still fails the suite.
func suiteError(err error, key, resource string) error {
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || stale.Resource != key {
		return err
	}
	named := *stale
	named.Resource = resource
	return &named
}

func readPair(ctx context.Context, rdb redis.UniversalClient, key string, get func(redis.Pipeliner, string) *redis.StringCmd) (string, fence.Token, error) {
	var value, token *redis.StringCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		value = get(p, key)
		token = p.HGet(ctx, redisfence.FenceKey(key), "token")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fence.None, err
	}
	v, err := value.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fence.None, err
	}
	ts, err := token.Result()
	if errors.Is(err, redis.Nil) {
		return v, fence.None, nil
	}
	if err != nil {
		return "", fence.None, err
	}
	t, err := fence.ParseToken(ts)
	return v, t, err
}

var (
	_ sinktest.SlotScopeSink = (*setSink)(nil)
	_ sinktest.SlotScopeSink = (*hsetSink)(nil)
	_ sinktest.SlotScopeSink = (*evalSink)(nil)
)

// unguardedSink is the negative control: it reads the fence state, applies
// the rule in Go, and then writes value and token with plain commands, so
// the check and the write are two steps.
type unguardedSink struct{ setSink }

func (s *unguardedSink) Write(ctx context.Context, resource string, t fence.Token, owner, value string) error {
	key := s.prefix + resource
	state, err := s.rdb.HMGet(ctx, redisfence.FenceKey(key), "token", "owner").Result()
	if err != nil {
		return err
	}
	var current fence.Token
	currentOwner, _ := state[1].(string)
	if ts, ok := state[0].(string); ok {
		if current, err = fence.ParseToken(ts); err != nil {
			return err
		}
	}
	if err := fence.Check(key, current, currentOwner, t, owner); err != nil {
		return err
	}
	runtime.Gosched()
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, value, 0)
		p.HSet(ctx, redisfence.FenceKey(key), "token", t.String(), "owner", owner)
		return nil
	})
	return err
}

func newSetSink(t *testing.T, b redistest.Backend) *setSink {
	rdb := b.New(t)
	return &setSink{rdb: rdb, w: newWriter(t, rdb), prefix: redistest.Prefix(t, rdb)}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			t.Run("Set", func(t *testing.T) {
				t.Parallel()
				sinktest.Exercise(t, func(t *testing.T) sinktest.Sink { return newSetSink(t, b) })
			})
			t.Run("HSet", func(t *testing.T) {
				t.Parallel()
				sinktest.Exercise(t, func(t *testing.T) sinktest.Sink { return &hsetSink{*newSetSink(t, b)} })
			})
			t.Run("Eval", func(t *testing.T) {
				t.Parallel()
				sinktest.Exercise(t, func(t *testing.T) sinktest.Sink { return &evalSink{*newSetSink(t, b)} })
			})
			t.Run("NegativeControlUnguarded", func(t *testing.T) {
				t.Parallel()
				sinktest.NegativeControl(t, func(t *testing.T) sinktest.Sink { return &unguardedSink{*newSetSink(t, b)} })
			})
		})
	}
}
