//go:build !linux

package childproc

import "syscall"

// Outside Linux there is no death signal: a parent killed with SIGKILL leaves its children
// running.
func sysProcAttr(syscall.Signal) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
