// Package emucmd is what the emulators' commands (spanneremu, tasksemu, paysim) share: a logger
// for -v, and the life of the process: start the emulator, print its one ready line on standard
// output (what the dev stack and scripts wait for), serve until SIGINT or SIGTERM, then close it
// within 30 seconds.
package emucmd

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"
)

// ShutdownTimeout bounds an emulator's Close after the signal.
const ShutdownTimeout = 30 * time.Second

// Logf returns a printf to standard error with timestamps when verbose, else nil (the emulators'
// Options.Logf: nil logs nothing).
func Logf(verbose bool) func(format string, args ...any) {
	if !verbose {
		return nil
	}
	return log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds).Printf
}

// Main runs the emulator of command name: start starts it and returns its ready line and its
// Close. Main prints the line, waits for SIGINT or SIGTERM, closes the emulator and returns; it
// exits with status 1, the error on standard error, when starting or closing fails.
func Main(name string, start func(ctx context.Context) (ready string, closeFn func() error, err error)) {
	TuneGC()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, start); err != nil {
		log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds).Printf("%s: %v", name, err)
		stop()
		os.Exit(1)
	}
}

// EmulatorGOGC is the emulators' collector setting, unless GOGC is set: their live heap is small
// and they allocate much per request (gRPC, protobuf, rows), so Go's default (collect whenever
// the heap doubles) collected several times a second, 6–7 % of the emulators' CPU under the
// stack's load; 400 lets the heap grow to five times the live heap first.
const EmulatorGOGC = 400

// TuneGC applies EmulatorGOGC to this process, unless GOGC is set. The emulators' commands call
// it, and so does a process that runs them in-process under load (the bench).
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(EmulatorGOGC)
	}
}

func run(ctx context.Context, start func(ctx context.Context) (string, func() error, error)) error {
	ready, closeFn, err := start(ctx)
	if err != nil {
		return err
	}
	fmt.Println(ready)
	<-ctx.Done()
	done := make(chan error, 1)
	go func() { done <- closeFn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(ShutdownTimeout):
		return fmt.Errorf("shutdown took longer than %s", ShutdownTimeout)
	}
}
