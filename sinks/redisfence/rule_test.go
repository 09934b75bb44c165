package redisfence_test

import (
	"context"
	"math"
	"testing"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/fencerule/fenceruletest"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// The shared case table of the acceptance rule, through each fenced write.
func TestWritesPassTheRuleTable(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		t.Run("Set", func(t *testing.T) {
			fenceruletest.Run(t, b.prefix+"set:", math.MaxUint64, func(ctx context.Context, key string, h fence.Holder) error {
				return b.w.Set(ctx, key, "v", h, 0)
			})
		})
		t.Run("HSet", func(t *testing.T) {
			fenceruletest.Run(t, b.prefix+"hset:", math.MaxUint64, func(ctx context.Context, key string, h fence.Holder) error {
				return b.w.HSet(ctx, key, map[string]string{"f": "v"}, h)
			})
		})
		script := redisfence.NewScript("return redis.call('SET', KEYS[1], ARGV[1])")
		t.Run("Eval", func(t *testing.T) {
			fenceruletest.Run(t, b.prefix+"eval:", math.MaxUint64, func(ctx context.Context, key string, h fence.Holder) error {
				_, err := b.w.Eval(ctx, script, []string{key}, h, "v")
				return err
			})
		})
	})
}
