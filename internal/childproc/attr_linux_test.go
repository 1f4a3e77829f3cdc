package childproc

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// When the parent dies by SIGKILL (no chance to stop anything), the kernel kills its child. The
// parent is this test binary run again as a helper (CHILDPROC_HELPER): it starts `sleep 60`,
// prints its pid and waits to be killed.
func TestChildDiesWithParent(t *testing.T) {
	if os.Getenv("CHILDPROC_HELPER") != "" {
		child := exec.Command("sleep", "60")
		if err := Start(child, syscall.SIGKILL); err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.Itoa(child.Process.Pid) + "\n")
		select {}
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithParent$")
	parent.Env = append(os.Environ(), "CHILDPROC_HELPER=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		parent.Process.Kill()
		t.Fatalf("helper printed no pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	parent.Process.Kill()
	parent.Wait()
	// The child is our grandchild: once killed it is a zombie until init reaps it, then gone.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if dead(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d still alive 10 s after its parent was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dead reports whether pid no longer runs: gone, or a zombie waiting to be reaped.
func dead(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
