// Package httpfencetest holds in-memory fakes of httpfence's stores, for
// tests and examples: MemoryStore (an idemstore.Store) and MemoryFence (an
// idemstore.FenceStore). They live in process memory, are lost on restart
// and are not shared between replicas, so they give none of httpfence's
// guarantees across processes: use redisstore or pgstore in production.
// MemoryFence is a fence.SlotScopePruner too, closing slot scopes as they do
// and refusing a cutoff within fence.PruneMargin of its clock (time.Now)
// as they do of theirs; SetPruneMargin shortens the margin for tests.
package httpfencetest
