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
	name string
	cmd  *exec.Cmd
	tail *tail

	// ready is closed when the process prints its ready line (emulators only).
	ready     chan struct{}
	readyOnce sync.Once
	// done is closed when the process has exited and its output is flushed; err is then its exit
	// status.
	done chan struct{}
	err  error
}

// procSpec says how to run a child.
type procSpec struct {
	name string
	bin  string
	args []string
	env  []string // added to (and overriding) the devstack's own environment
	// readyPrefix, if set, is the start of the line the process prints once it serves.
	readyPrefix string
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how the process ended, with its last lines of output.
func (p *proc) exitError() error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s exited unexpectedly (%v)", p.name, p.err)
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
	if p.exited() {
		return
	}
	pid := p.cmd.Process.Pid
	if err := signalGroup(pid, syscall.SIGTERM); err != nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
		con.say("%s did not exit within %s of SIGTERM: killing it", p.name, timeout)
	case <-force:
		con.say("killing %s", p.name)
	}
	if err := signalGroup(pid, syscall.SIGKILL); err != nil {
		p.cmd.Process.Kill()
	}
	<-p.done
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
		done:  make(chan struct{}),
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
		if spec.readyPrefix != "" && strings.HasPrefix(line, spec.readyPrefix) {
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
	if err := childproc.Start(cmd, syscall.SIGTERM); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", spec.name, spec.bin, err)
	}
	p.cmd = cmd
	con.say("started %s (pid %d), log %s", spec.name, cmd.Process.Pid, logPath)
	go func() {
		err := cmd.Wait()
		stdout.flush()
		stderr.flush()
		p.err = err
		close(p.done)
		exited <- p
	}()
	return p, nil
}
