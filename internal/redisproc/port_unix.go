//go:build unix

package redisproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// claimPort claims port for one Server, against every Server of this
// process and of every other process that uses this package (go test runs
// packages' test binaries side by side): an exclusive flock(2) on the
// port's file in a directory under os.TempDir(). ok is false when another
// Server holds it. The claim lasts until release, or until the process
// exits, however it exits (the kernel drops the lock with the file).
//
// A port that is only free, as the kernel sees it, is not enough: while a
// Server is killed, its clients still dial its port, and a server another
// test started there would answer them (a quorum test counted a master it
// had killed as up, and a master it did not have as granting).
func claimPort(port int) (c *portClaim, ok bool, err error) {
	dir := filepath.Join(os.TempDir(), "holdfast-redisproc-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, false, fmt.Errorf("claim port %d: %w", port, err)
	}
	// Any user may claim, as in /tmp; best effort, the umask applies.
	_ = os.Chmod(dir, 0o777|os.ModeSticky)
	// Read-only is enough for flock, and opens a file another user made.
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("claim port %d: %w", port, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("claim port %d: flock: %w", port, err)
	}
	return &portClaim{f: f}, true, nil
}

// portClaim is a claimed port: its lock file, open and locked. The file is
// never removed (removing a lock file races with a claim in progress).
type portClaim struct{ f *os.File }

// release gives the port up; nil does nothing.
func (c *portClaim) release() {
	if c != nil {
		_ = c.f.Close()
	}
}
