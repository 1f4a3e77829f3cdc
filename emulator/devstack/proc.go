package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spanmart/spanmart/internal/childproc"
)

// A proc is one child process: an emulator or a service.
type proc struct {
	*childproc.Proc // Done is closed once it has exited and its output is flushed
	name            string
	tail            *tail

	// ready is closed when the process prints its ready line (emulators only).
	ready     chan struct{}
	readyOnce sync.Once
}

// procSpec says how to run a child.
type procSpec struct {
	name string
	bin  string
	args []string
	env  []string // added to (and overriding) the devstack's own environment
	// readyText, if set, is in the line the process prints once it serves (the emulators start
	// theirs with it; Mailpit's is a log line with a timestamp first).
	readyText string
}

// exitError describes how the process ended, with its last lines of output.
func (p *proc) exitError() error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s exited unexpectedly (%v)", p.name, p.Err())
	lines := p.tail.get()
	switch {
	case len(lines) == 1:
		b.WriteString("; its last line:")
	case len(lines) > 1:
		fmt.Fprintf(&b, "; its last %d lines:", len(lines))
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "\n    %s", l)
	}
	return errors.New(b.String())
}

// stop sends SIGTERM to the process's group and waits up to timeout (or until force is closed) for
// it to exit, then kills the group.
func (p *proc) stop(timeout time.Duration, force <-chan struct{}, con *console) {
	switch p.Stop(timeout, force) {
	case childproc.StoppedTimeout:
		con.say("%s did not exit within %s of SIGTERM: killed it", p.name, timeout)
	case childproc.StoppedForced:
		con.say("killed %s", p.name)
	}
}

// startProc starts a child whose output goes to con (and its log file) and exits reports on
// exited when it ends.
func startProc(con *console, spec procSpec, logPath string, exited chan<- *proc) (*proc, error) {
	if err := con.register(spec.name, logPath); err != nil {
		return nil, err
	}
	p := &proc{
		name:  spec.name,
		tail:  &tail{n: 30},
		ready: make(chan struct{}),
	}
	emit := func(line string) {
		display := line
		if con.pretty {
			if pretty, ok := prettyLog(line); ok {
				display = pretty
			}
		}
		p.tail.add(display)
		con.write(spec.name, display, line)
		if spec.readyText != "" && strings.Contains(line, spec.readyText) {
			p.readyOnce.Do(func() { close(p.ready) })
		}
	}
	stdout, stderr := &lineWriter{emit: emit}, &lineWriter{emit: emit}
	cmd := exec.Command(spec.bin, spec.args...)
	cmd.Env = append(os.Environ(), spec.env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// If the child leaves a grandchild holding its output open, Wait must not hang on it forever.
	cmd.WaitDelay = 2 * time.Second
	// Its own process group: a terminal's Ctrl-C reaches only the devstack, which then stops the
	// children in order; SIGTERM if the devstack dies without stopping it.
	var err error
	p.Proc, err = childproc.Run(cmd, syscall.SIGTERM, func(error) {
		stdout.flush()
		stderr.flush()
	})
	if err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", spec.name, spec.bin, err)
	}
	con.say("started %s (pid %d), log %s", spec.name, p.Pid(), logPath)
	go func() {
		<-p.Done()
		exited <- p
	}()
	return p, nil
}
