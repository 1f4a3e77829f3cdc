package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/spanmart/spanmart/internal/childproc"
)

// A Proc is one run of a service process (childproc.Proc: Exited, Err, ExitCode, Done, Signal,
// Stop).
type Proc struct {
	*childproc.Proc
	Name string
	Pid  int
}

// stop sends SIGTERM to the group and waits up to timeout, then kills it.
func (p *Proc) stop(timeout time.Duration) { p.Stop(timeout, nil) }

func (s *Stack) proc(name string) *Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[name]
}

// launch starts a process with the stack's environment, the options' extra environment for its
// name, then extra (later entries win), its output appended to its log file.
func (s *Stack) launch(name string, extra ...string) error {
	s.mu.Lock()
	kind, ok := s.kinds[name]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("harness: no process %s", name)
	}
	if p := s.procs[name]; p != nil && !p.Exited() {
		s.mu.Unlock()
		return fmt.Errorf("harness: %s is already running (pid %d)", name, p.Pid)
	}
	env := append(os.Environ(), s.env(name)...)
	env = append(env, s.opts.Env[name]...)
	env = append(env, extra...)
	ln := s.listeners[name]
	delete(s.listeners, name)
	port := s.ports[name]
	s.mu.Unlock()
	if ln == nil { // a restart: bind the process's port again, here, before the child starts
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return fmt.Errorf("harness: bind %s's port %d again: %w", name, port, err)
		}
		ln = l.(*net.TCPListener)
	}
	lf, err := ln.File() // a duplicate the child inherits as fd 3
	ln.Close()
	if err != nil {
		return fmt.Errorf("harness: %s's listener: %w", name, err)
	}
	defer lf.Close()
	env = append(env, "SPANMART_LISTEN_FD=3")

	logf, err := os.OpenFile(s.LogPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== harness: starting %s at %s, extra env %v\n", name, time.Now().UTC().Format(time.RFC3339Nano), extra)
	cmd := exec.Command(s.bin + string(os.PathSeparator) + kind)
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{lf}
	cmd.Stdout, cmd.Stderr = logf, logf
	// SIGKILL if the harness dies without stopping it (a test binary killed by its timeout).
	cp, err := childproc.Run(cmd, syscall.SIGKILL, func(error) {
		fmt.Fprintf(logf, "=== harness: %s (pid %d) exited: %v\n", name, cmd.Process.Pid, cmd.ProcessState)
		logf.Close()
	})
	if err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Proc: cp, Name: name, Pid: cp.Pid()}
	s.mu.Lock()
	s.procs[name] = p
	s.mu.Unlock()
	s.opts.Logf("started %s (pid %d) on %s", name, p.Pid, s.URL(name))
	return nil
}

// Start starts a stopped process again with extra environment (e.g. "SPANMART_FAULTS=..."), on
// the same port, and waits until it is ready.
func (s *Stack) Start(ctx context.Context, name string, extraEnv ...string) error {
	if err := s.launch(name, extraEnv...); err != nil {
		return err
	}
	return s.WaitReady(ctx, name)
}

// addInstance names a new process of binary and gives it a free port that is no other process's
// (not even one stopped just now, which a drill restarts on its own port).
func (s *Stack) addInstance(name, binary string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.kinds[name]; ok {
		return fmt.Errorf("harness: %s exists already", name)
	}
	taken := map[int]bool{}
	for _, p := range s.ports {
		taken[p] = true
	}
	port := 0
	for port == 0 || taken[port] {
		var err error
		if port, err = FreePort(); err != nil {
			return err
		}
	}
	s.kinds[name], s.ports[name] = binary, port
	return nil
}

// StartInstance starts another instance of a binary ("relay") under a new name ("relay-2") on its
// own free port, with the same environment as the original plus extraEnv, and waits until it is
// ready.
func (s *Stack) StartInstance(ctx context.Context, name, binary string, extraEnv ...string) error {
	if err := s.addInstance(name, binary); err != nil {
		return err
	}
	return s.Start(ctx, name, extraEnv...)
}

// Restart stops a process gracefully (if it runs) and starts it again with extraEnv (replacing the
// extra environment of its previous run), waiting until it is ready.
func (s *Stack) Restart(ctx context.Context, name string, extraEnv ...string) error {
	s.Stop(name)
	return s.Start(ctx, name, extraEnv...)
}

// Stop sends SIGTERM and waits for the process to exit (SIGKILL after 10 s).
func (s *Stack) Stop(name string) {
	if p := s.proc(name); p != nil {
		p.stop(10 * time.Second)
	}
}

// Kill sends SIGKILL to the process's group and waits until it is gone.
func (s *Stack) Kill(name string) {
	p := s.proc(name)
	if p == nil || p.Exited() {
		return
	}
	p.Signal(syscall.SIGKILL)
	<-p.Done()
}

// Proc is the current (or last) run of a process, nil if it never started.
func (s *Stack) Proc(name string) *Proc { return s.proc(name) }

// WaitExit waits up to timeout for a process to exit by itself (a failpoint) and returns its exit
// status.
func (s *Stack) WaitExit(ctx context.Context, name string, timeout time.Duration) (int, error) {
	p := s.proc(name)
	if p == nil {
		return 0, fmt.Errorf("harness: %s was never started", name)
	}
	select {
	case <-p.Done():
		return p.ExitCode(), nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s (pid %d) still runs after %s", name, p.Pid, timeout)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Running reports whether the process runs now.
func (s *Stack) Running(name string) bool {
	p := s.proc(name)
	return p != nil && !p.Exited()
}

// String describes the processes, for failure messages.
func (s *Stack) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := ""
	for name, p := range s.procs {
		state := "running"
		if p.Exited() {
			state = "exited " + strconv.Itoa(p.ExitCode())
		}
		out += fmt.Sprintf("%s pid %d %s on port %d\n", name, p.Pid, state, s.ports[name])
	}
	return out
}
