package childproc

import (
	"os/exec"
	"syscall"
	"testing"
)

// A child runs in its own process group, and with the death signal asked for on Linux.
func TestStart(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := Start(cmd, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	pgid, err := syscall.Getpgid(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if pgid != cmd.Process.Pid {
		t.Errorf("child's process group %d, want its own (%d)", pgid, cmd.Process.Pid)
	}
}
