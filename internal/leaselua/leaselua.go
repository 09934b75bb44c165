package leaselua

import _ "embed"

// Acquire defines holdfast_lease_acquire(lease_key, fence_key, owner,
// ttl_ms, idle_ms) and holdfast_lease_label(holder_key, token, label,
// idle_ms) (see acquire.lua); Release defines
// holdfast_lease_release(lease_key, waiting_key, owner) (see release.lua);
// Lua is both. None touches a key itself; put the ones a script calls
// among its preludes (luascript.New(leaselua.Acquire, ...)): every
// function a prelude defines is made anew at each call of the script.
var (
	//go:embed acquire.lua
	Acquire string
	//go:embed release.lua
	Release string
	Lua     = Acquire + Release
)
