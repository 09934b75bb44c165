package redisfence

import (
	"context"
	"errors"
	"fmt"

	"github.com/holdfast-go/holdfast/fence"
)

// ErrFenceChanged is returned by Reset when the fence no longer holds the
// token the caller expected: a holder raised it since it was inspected.
// Nothing is changed.
var ErrFenceChanged = errors.New("redisfence: fence changed since it was read")

// Reset removes key's fence of scope, so that the next write of any holder
// of scope is accepted again, and returns the token it held (fence.None,
// and no error, when there was none). It is an operator's way out of a fence
// raised by a token no holder was issued (a forged or corrupted one, see
// holdfast fence reset): it never runs as part of normal operation.
//
// expect guards against a race with the holders: when it is not
// fence.None, the fence is removed only while it still holds expect (the
// token the operator inspected), and ErrFenceChanged is returned otherwise.
// The check and the removal are one script.
//
// Removing a fence lets a stale holder's late write in: call it only when
// no holder of scope can be running with an older token (the lease of
// scope is not held, or every older holder is known to be gone).
func (w *Writer) Reset(ctx context.Context, key, scope string, expect fence.Token) (fence.Token, error) {
	if err := w.ready(ctx); err != nil {
		return fence.None, err
	}
	if err := w.validateKey(key); err != nil {
		return fence.None, err
	}
	if err := w.checkFormat(ctx); err != nil {
		return fence.None, err
	}
	want := ""
	if expect != fence.None {
		want = expect.String()
	}
	reply, err := resetScript.Run(ctx, w.auto, []string{FenceKey(key)}, scope, want).Slice()
	if err != nil {
		return fence.None, wrapRedisError(ctx, "reset fence of", key, err)
	}
	switch {
	case len(reply) == 1 && reply[0] == int64(0):
		return fence.None, nil
	case len(reply) == 2 && (reply[0] == int64(1) || reply[0] == int64(2)):
		token, err := parseToken(reply[1])
		if err != nil {
			return fence.None, fmt.Errorf("redisfence: fence of %q: %w", key, err)
		}
		if reply[0] == int64(2) {
			return token, fmt.Errorf("%w: %q scope %q holds token %d, not %d", ErrFenceChanged, key, scope, token, expect)
		}
		return token, nil
	}
	return fence.None, fmt.Errorf("%w: %v for %q", ErrUnexpectedReply, reply, key)
}
