package lease

// KeysOf returns the lease and fence keys of name on a Client made by New
// (its *RedisBackend), for the tests of this directory.
func KeysOf(c *Client, name string) (leaseKey, fenceKey string) {
	k, err := c.b.(*RedisBackend).Keys(name)
	if err != nil {
		panic(err) // a test's own constant name
	}
	return k.Lease, k.Fence
}
