package main

import (
	"os"
	"syscall"
)

// flock takes an exclusive, non-blocking lock on f; the kernel releases it when the process exits.
func flock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }
