package redisproc

import "syscall"

// sysProcAttr makes the kernel kill the process when the test binary dies
// without running its cleanups (a panic, a timeout, SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
