//go:build !unix

package redisproc

// claimPort claims nothing where flock(2) is missing: a port is only
// checked free (see port_unix.go for what that leaves open).
func claimPort(int) (*portClaim, bool, error) { return &portClaim{}, true, nil }

type portClaim struct{}

func (*portClaim) release() {}
