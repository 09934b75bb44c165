package redisfence

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/luascript"
)

// splitScript runs slotscope.lua's parse alone: {unit, slot} for a slot
// scope, {} for any other.
var splitScript = luascript.New(slotScopeLua, `
local unit, slot = holdfast_slot_scope(ARGV[1])
if not unit then
  return {}
end
return {unit, slot}`)

// SplitSlotScopeInLua is the parse every script of the package applies
// (slotscope.lua), run on rdb, for the tests that hold it to
// fence.SplitSlotScope.
func SplitSlotScopeInLua(ctx context.Context, rdb redis.UniversalClient, scope string) (unit string, at int64, ok bool, err error) {
	reply, err := splitScript.Run(ctx, rdb, nil, scope).Slice()
	if err != nil || len(reply) == 0 {
		return "", 0, false, err
	}
	if len(reply) == 2 {
		unit, uok := reply[0].(string)
		at, aok := reply[1].(int64)
		if uok && aok {
			return unit, at, true, nil
		}
	}
	return "", 0, false, fmt.Errorf("split %q: reply %#v", scope, reply)
}
