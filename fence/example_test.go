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
