package harness

import "syscall"

// sysProcAttr puts a child in its own process group (so a signal reaches anything it started) and
// makes the kernel kill it when the harness dies without stopping it (a test binary killed by its
// timeout, a panic): no orphan keeps a port busy. Pdeathsig fires when the forking *thread* exits,
// hence the spawner goroutine locked to its thread (see spawner).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
