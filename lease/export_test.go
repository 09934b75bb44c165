package lease

import "github.com/holdfast-go/holdfast/lease/redislease"

// KeysOf returns the lease and fence keys of name on a Client made by New
// (its *redislease.Backend), for the tests of this directory.
func KeysOf(c *Client, name string) (leaseKey, fenceKey string) {
	k, err := c.b.(*redislease.Backend).Keys(name)
	if err != nil {
		panic(err) // a test's own constant name
	}
	return k.Lease, k.Fence
}
