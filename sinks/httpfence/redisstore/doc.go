// Package redisstore holds httpfence's stores in Redis: Store, the
// idempotency records (idemstore.Store), and Fence, the admission fence
// (idemstore.FenceStore). They live apart from httpfence so that the
// middleware does not import go-redis.
//
// Every operation is one Lua script on one key, run by EVALSHA with an EVAL
// fallback on NOSCRIPT, the calls of concurrent requests batched into
// pipelines (one round trip). Fence's script applies the acceptance rule
// every holdfast script shares (fence.Accept's rule in Lua: tokens compared
// exactly over the whole uint64 range as decimal strings). Both work with
// any redis.UniversalClient (single, Sentinel, Cluster).
package redisstore
