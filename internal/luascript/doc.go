// Package luascript runs holdfast's Lua scripts on Redis: one way to build
// a script's text (its parts concatenated, shared preludes first), EVALSHA
// with an EVAL fallback on NOSCRIPT (after a SCRIPT FLUSH, a restart or a
// failover), on a plain client, through an auto-pipeline (internal/autopipe)
// or queued in a pipeline.
//
// A Script's command is built in full by the caller or by Run: "evalsha",
// the SHA-1, the key count, the keys, then the arguments, the layout of
// Redis' EVALSHA, so callers that run a script often can build and box its
// arguments once (see lease) and a reply that failed with NOSCRIPT can be
// run again from its command alone (Fallback).
package luascript
