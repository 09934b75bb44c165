package leaselua

import _ "embed"

// Lua defines holdfast_lease_acquire(lease_key, fence_key, owner, ttl_ms),
// holdfast_lease_release(lease_key, waiting_key, owner) and
// holdfast_lease_label(holder_key, label) (see lease.lua). It touches no key itself; put it among a script's preludes
// (luascript.New(leaselua.Lua, ...)).
//
//go:embed lease.lua
var Lua string
