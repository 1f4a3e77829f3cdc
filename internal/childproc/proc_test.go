package childproc_test

import (
	"bufio"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/spanmart/spanmart/internal/childproc"
)

func TestRunReportsTheExit(t *testing.T) {
	called := make(chan error, 1)
	p, err := childproc.Run(exec.Command("sh", "-c", "exit 3"), syscall.SIGKILL, func(err error) { called <- err })
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	select {
	case err := <-called:
		if err == nil {
			t.Error("exited was told nil for exit status 3")
		}
	default:
		t.Error("Done closed before exited was called")
	}
	if !p.Exited() || p.ExitCode() != 3 || p.Err() == nil {
		t.Errorf("exited %v, code %d, err %v; want true, 3, an error", p.Exited(), p.ExitCode(), p.Err())
	}
}

// Stop ends a process that obeys SIGTERM gracefully, and kills one that ignores it after the
// timeout, or at once when forced; the whole process group goes (the shell's child too).
func TestStop(t *testing.T) {
	for _, c := range []struct {
		name, script string
		force        bool
		want         string
	}{
		{"obeys SIGTERM", "echo ready; sleep 30", false, childproc.StoppedGracefully},
		{"ignores SIGTERM", `trap "" TERM; echo ready; sleep 30 & wait`, false, childproc.StoppedTimeout},
		{"forced", `trap "" TERM; echo ready; sleep 30 & wait`, true, childproc.StoppedForced},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", c.script)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			p, err := childproc.Run(cmd, syscall.SIGKILL, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The script says "ready" once its trap is set.
			if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("first line %q, %v", line, err)
			}
			if p.Exited() || p.ExitCode() != -1 {
				t.Fatalf("running process: exited %v, code %d", p.Exited(), p.ExitCode())
			}
			var force chan struct{}
			if c.force {
				force = make(chan struct{})
				close(force)
			}
			if got := p.Stop(500*time.Millisecond, force); got != c.want {
				t.Errorf("Stop = %s, want %s", got, c.want)
			}
			if !p.Exited() {
				t.Error("not exited after Stop")
			}
			// The group's other member (sleep) was killed too; it may take its new parent a
			// moment to reap it.
			deadline := time.Now().Add(5 * time.Second)
			for syscall.Kill(-p.Pid(), 0) == nil {
				if time.Now().After(deadline) {
					t.Fatalf("process group %d still has members 5 s after Stop", p.Pid())
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
