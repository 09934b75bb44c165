//go:build !linux

package redisproc

import "syscall"

// sysProcAttr: without Pdeathsig, a test binary that dies without running
// its cleanups leaves its processes behind.
func sysProcAttr() *syscall.SysProcAttr { return nil }
