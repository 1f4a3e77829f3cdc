//go:build unix && !linux

package main

import (
	"os"
	"syscall"
)

// sysProcAttr puts a child in its own process group, so a terminal's Ctrl-C (sent to the foreground
// group) reaches only the devstack, which then stops the children in order. Outside Linux there is
// no Pdeathsig: if the devstack is killed with SIGKILL, stop its children by hand (the ports table
// in README.md says which).
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// flock takes an exclusive, non-blocking lock on f; the kernel releases it when the process exits.
func flock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }
