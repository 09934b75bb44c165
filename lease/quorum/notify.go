package quorum

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// SubscribeWait bounds how long Released waits for its subscriptions
// before it returns with the ones that are active (1 s). It matters only
// when masters hang: a subscription has no read timeout of its own.
const SubscribeWait = time.Second

// Released implements leasedriver.Notifier. It subscribes to the lease's release
// channel on every master and returns once enough subscriptions are
// active that a release, which publishes on each master where it deleted
// our key (a majority), reaches at least one of them: Nodes() - Quorum() +
// 1. Masters that are down are skipped, so that number is not always
// reached; it then returns when every subscription answered or after
// SubscribeWait, with the ones that are active, and an error only when
// none is (the waiter then polls on the holder's remaining TTL).
//
// The returned function stops every listener, and waits for them.
func (b *Backend) Released(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	leaseKey, _ := b.Keys(name)
	w := &watch{out: make(chan struct{}, 1), settled: make(chan error, len(b.nodes))}
	for _, rdb := range b.nodes {
		w.wg.Go(func() { w.listen(ctx, rdb, leaseKey+releaseSuffix) })
	}
	timer := time.NewTimer(SubscribeWait)
	defer timer.Stop()
	need := len(b.nodes) - b.quorum + 1
	active := 0
	var errs []error
wait:
	for range b.nodes {
		select {
		case err := <-w.settled:
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if active++; active >= need {
				break wait
			}
		case <-timer.C:
			break wait
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
			active = 0
			break wait
		}
	}
	if active == 0 {
		w.stop()
		return nil, nil, errors.Join(append(errs, errors.New("quorum: no release subscription active"))...)
	}
	return w.out, w.stop, nil
}

// watch is one Released call: a listener per master, each owning one
// PubSub, all stopped and waited for by stop.
type watch struct {
	out     chan struct{} // buffered 1: a release was seen
	settled chan error    // one value per listener: nil once subscribed
	wg      sync.WaitGroup
	once    sync.Once

	mu      sync.Mutex
	stopped bool
	subs    []*redis.PubSub
}

func (w *watch) listen(ctx context.Context, rdb redis.UniversalClient, channel string) {
	ps := rdb.Subscribe(ctx, channel)
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		_ = ps.Close()
		w.settled <- errors.New("quorum: stopped")
		return
	}
	w.subs = append(w.subs, ps)
	w.mu.Unlock()
	// The subscription's confirmation; an error when the master is down,
	// or when stop closed ps while it hangs.
	if _, err := ps.Receive(ctx); err != nil {
		w.settled <- err
		return
	}
	w.settled <- nil
	for {
		if _, err := ps.ReceiveMessage(ctx); err != nil {
			return // closed by stop, or the connection broke
		}
		select {
		case w.out <- struct{}{}:
		default:
		}
	}
}

// stop closes every subscription and waits for the listeners.
func (w *watch) stop() {
	w.once.Do(func() {
		w.mu.Lock()
		w.stopped = true
		subs := w.subs
		w.mu.Unlock()
		for _, ps := range subs {
			_ = ps.Close()
		}
		w.wg.Wait()
	})
}
