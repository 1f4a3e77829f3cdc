//go:build unix && !linux

package main

import (
	"os"
	"syscall"
)

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// flock takes an exclusive, non-blocking lock on f; the kernel releases it when the process exits.
func flock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }
