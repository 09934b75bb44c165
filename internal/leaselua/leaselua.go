package leaselua

import _ "embed"

// Lua defines holdfast_lease_acquire(lease_key, fence_key, owner, ttl_ms)
// and holdfast_lease_release(lease_key, waiting_key, owner) (see
// lease.lua). It touches no key itself; put it among a script's preludes
// (luascript.New(leaselua.Lua, ...)).
//
//go:embed lease.lua
var Lua string
