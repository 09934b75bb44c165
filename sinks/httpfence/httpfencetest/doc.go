// Package httpfencetest holds in-memory fakes of httpfence's stores, for
// tests and examples: MemoryStore (an idemstore.Store) and MemoryFence (an
// idemstore.FenceStore). They live in process memory, are lost on restart
// and are not shared between replicas, so they give none of httpfence's
// guarantees across processes: use redisstore or pgstore in production.
// MemoryFence is a fence.SlotScopePruner too, closing slot scopes as they do.
package httpfencetest
