package redisfence

import (
	_ "embed"

	"github.com/holdfast-go/holdfast/internal/fencerule"
	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/internal/prunecutoff"
)

// The Lua sources. Each file's header names its KEYS and ARGV.
var (
	//go:embed slotscope.lua
	slotScopeLua string
	//go:embed fence.lua
	fenceLua string
	//go:embed set.lua
	setLua string
	//go:embed hset.lua
	hsetLua string
	//go:embed eval.lua
	evalLua string
	//go:embed current.lua
	currentLua string
	//go:embed reset.lua
	resetLua string
	//go:embed prune.lua
	pruneLua string
)

// The package's scripts, loaded once per server by EVALSHA with an EVAL
// fallback on NOSCRIPT (internal/luascript). Every write starts with the
// acceptance rule (fencerule.Lua), the parse of slot scopes
// (slotscope.lua) and the scoped fence state (fence.lua); pruneScript
// checks its cutoff against the server's clock (prunecutoff.Lua) and
// parses scopes with the same slotscope.lua.
var (
	setScript     = luascript.New(fencerule.Lua, slotScopeLua, fenceLua, setLua)
	hsetScript    = luascript.New(fencerule.Lua, slotScopeLua, fenceLua, hsetLua)
	currentScript = luascript.New(currentLua)
	resetScript   = luascript.New(resetLua)
	pruneScript   = luascript.New(prunecutoff.Lua, slotScopeLua, pruneLua)
)

// Script is a caller's Lua body made into a fenced script: Writer.Eval runs
// it only when the fencing token passes the rule. Make it once with
// NewScript and reuse it; it is safe for concurrent use.
type Script struct {
	script *luascript.Script
}

// NewScript wraps body, the text of a Lua script, so that Writer.Eval runs
// it only when the token passes the acceptance rule, in the same script
// invocation as the check (so atomically with it). The body is written as
// for EVAL: it reads its keys from KEYS (KEYS[1] is the fenced resource) and
// its arguments from ARGV, as passed to Eval, and its return value is
// Eval's result. It runs after the fence is raised.
//
// The body becomes the inside of a Lua function, so it may use return at
// its top level, but must not use the vararg "...". Redis does not roll
// back a script that fails halfway: a body that raises an error after a
// write leaves that write, and the raised fence, in place.
func NewScript(body string) *Script {
	return &Script{script: luascript.New(fencerule.Lua, slotScopeLua, fenceLua, "local function holdfast_body(KEYS, ARGV)", body, "end", evalLua)}
}
