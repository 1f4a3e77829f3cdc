package main

import (
	"os"
	"syscall"
)

// sysProcAttr puts a child in its own process group, so a terminal's Ctrl-C (sent to the foreground
// group) reaches only the devstack, which then stops the children in order, and so a stop signal
// sent to the group also reaches anything the child started. Pdeathsig makes the kernel send the
// child SIGTERM when the devstack dies without stopping it (SIGKILL, a panic): no orphan keeps a
// port or an emulator's files busy. Pdeathsig fires when the *thread* that forked exits, which is
// why children are started from one goroutine locked to its thread for the life of the process
// (see spawner).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// flock takes an exclusive, non-blocking lock on f; the kernel releases it when the process exits.
func flock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }
