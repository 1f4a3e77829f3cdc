package childproc

import (
	"os/exec"
	"syscall"
	"time"
)

// Proc is a child started by Run: its exit is waited for once, in the background.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Run starts cmd as Start does and waits for it in the background; exited, if not nil, is called
// once the process has ended (after cmd.Wait, before Done is closed), with how it ended.
func Run(cmd *exec.Cmd, deathSig syscall.Signal, exited func(error)) (*Proc, error) {
	if err := Start(cmd, deathSig); err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if exited != nil {
			exited(err)
		}
		p.err = err
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id (and the id of its process group).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended: nil while it runs or after exit status 0.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// ExitCode is the process's exit status; -1 while it runs or when a signal ended it.
func (p *Proc) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process's group (everything it started), or to the process alone if
// the group cannot be signalled.
func (p *Proc) Signal(sig syscall.Signal) {
	if err := syscall.Kill(-p.Pid(), sig); err != nil {
		p.cmd.Process.Signal(sig)
	}
}

// How Stop ended.
const (
	StoppedGracefully = "exited"  // the process exited after SIGTERM (or before)
	StoppedTimeout    = "timeout" // it did not exit within the timeout: killed
	StoppedForced     = "forced"  // force was closed first: killed
)

// Stop sends SIGTERM to the group and waits for the process to exit, up to timeout or until force
// is closed (nil: never), then sends SIGKILL and waits for it. It returns how it ended.
func (p *Proc) Stop(timeout time.Duration, force <-chan struct{}) string {
	if p.Exited() {
		return StoppedGracefully
	}
	p.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	how := StoppedGracefully
	select {
	case <-p.done:
		return how
	case <-t.C:
		how = StoppedTimeout
	case <-force:
		how = StoppedForced
	}
	p.Signal(syscall.SIGKILL)
	<-p.done
	return how
}
