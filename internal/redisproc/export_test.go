package redisproc

// ClaimPort is claimPort for package redisproc_test: ok is false when
// another Server holds port; release gives a claim up.
func ClaimPort(port int) (ok bool, release func(), err error) {
	c, ok, err := claimPort(port)
	return ok, c.release, err
}

// FreePortOf is freePortOf for package redisproc_test.
func FreePortOf(next func() int) (port int, release func(), err error) {
	port, c, err := freePortOf(next)
	return port, c.release, err
}
