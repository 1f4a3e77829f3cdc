//go:build !linux

package harness

import "syscall"

// sysProcAttr puts a child in its own process group. Outside Linux there is no Pdeathsig: a harness
// killed with SIGKILL leaves its children running.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
