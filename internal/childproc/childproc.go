// Package childproc starts the child processes of the dev stack and the e2e harness so that none
// outlives its parent: each child gets its own process group (a signal to the group reaches
// anything it started, and a terminal's Ctrl-C reaches only the parent) and, on Linux, a death
// signal the kernel sends it when the parent dies without stopping it (SIGKILL, a panic, a test
// binary killed by its timeout), so no orphan keeps a port or an emulator's files busy.
//
// Linux delivers the death signal when the *thread* that forked the child exits, not the process,
// and the Go runtime may retire threads: a child forked from an arbitrary goroutine could be
// signalled at a random moment. Start therefore forks every child from one goroutine locked to
// its OS thread for the life of the process; a locked thread whose goroutine never returns is
// never retired.
//
// Run starts a child the same way and gives back a Proc: its exit observed once, signals to its
// whole group, and Stop (SIGTERM, a bounded wait, then SIGKILL), which both stacks use.
package childproc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

type request struct {
	cmd  *exec.Cmd
	errc chan error
}

var (
	once sync.Once
	reqs chan request
)

// Start starts cmd in its own process group; on Linux the kernel sends it deathSig when this
// process dies. It overwrites cmd.SysProcAttr.
func Start(cmd *exec.Cmd, deathSig syscall.Signal) error {
	once.Do(func() {
		reqs = make(chan request)
		go func() {
			runtime.LockOSThread() // never unlocked: see the package comment
			for r := range reqs {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	cmd.SysProcAttr = sysProcAttr(deathSig)
	errc := make(chan error, 1)
	reqs <- request{cmd: cmd, errc: errc}
	return <-errc
}
