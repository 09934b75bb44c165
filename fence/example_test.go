package fence_test

import (
	"errors"
	"fmt"

	"github.com/holdfast-go/holdfast/fence"
)

// A sink keeps the highest token it accepted per resource and refuses a
// smaller one: the write of a holder that paused past its TTL.
func ExampleCheck() {
	current, currentOwner := fence.Token(1001), "replica-b"

	err := fence.Check("settlement:2026-11-30", current, currentOwner, 1000, "replica-a")
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Println("rejected:", stale.Presented, "<", stale.Current)
	}
	fmt.Println(errors.Is(err, fence.ErrStaleToken))

	fmt.Println(fence.Check("settlement:2026-11-30", current, currentOwner, 1002, "replica-c"))
	// Output:
	// rejected: 1000 < 1001
	// true
	// <nil>
}

func ExampleParseToken() {
	t, err := fence.ParseToken("1780000000000042")
	fmt.Println(t, err)
	_, err = fence.ParseToken("042")
	fmt.Println(errors.Is(err, fence.ErrInvalidToken))
	// Output:
	// 1780000000000042 <nil>
	// true
}

// A sink keeps one fence per (resource, scope): the tokens of two leases
// writing one resource are never compared, while a stale holder of one
// lease is still refused by its own lease's fence.
func ExampleHolder() {
	type fenceKey struct{ resource, scope string }
	fences := map[fenceKey]fence.Holder{}
	write := func(resource string, h fence.Holder) error {
		k := fenceKey{resource, h.Scope}
		cur := fences[k]
		if err := h.Check(resource, cur.Token, cur.Owner); err != nil {
			return err
		}
		fences[k] = h
		return nil
	}

	fmt.Println(write("/v1/charges", fence.Holder{Scope: "settle|tenant-a", Token: 1780000000000900, Owner: "r1"}))
	// tenant-b's lease issued a smaller token: another sequence, accepted.
	fmt.Println(write("/v1/charges", fence.Holder{Scope: "settle|tenant-b", Token: 1780000000000100, Owner: "r2"}))
	// A frozen former holder of tenant-a's lease is refused.
	err := write("/v1/charges", fence.Holder{Scope: "settle|tenant-a", Token: 1780000000000800, Owner: "r3"})
	fmt.Println(errors.Is(err, fence.ErrStaleToken), err)
	// Output:
	// <nil>
	// <nil>
	// true fence: stale fencing token for "/v1/charges" (scope "settle|tenant-a"): presented 1780000000000800, current 1780000000000900
}
