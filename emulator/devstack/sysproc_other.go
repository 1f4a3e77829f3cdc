//go:build !unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// The devstack manages process groups and signals, which it does only on Linux and macOS; on other
// systems it compiles (so `go build ./...` works everywhere) but refuses to start.
var errUnsupported = errors.New("the dev stack runs on Linux and macOS only")

func sysProcAttr() *syscall.SysProcAttr { return nil }
func flock(f *os.File) error            { return errUnsupported }
