// Package fencerule holds fence's acceptance rule (fence.Accept) for the
// two other media holdfast applies it in: Lua on Redis (Lua, the prelude of
// every fenced script) and SQL on PostgreSQL (Upsert, the statement of
// pgfence's guard). Sinks and ledgers build their scripts and statements
// from these, so the rule is written once per medium; package
// fenceruletest holds the case table all three pass.
package fencerule
