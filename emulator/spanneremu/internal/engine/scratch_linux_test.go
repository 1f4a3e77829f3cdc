package engine

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// An engine's own directory is named for its process and lies in memory when the machine has
// room there; creating one removes the directories of processes that are gone (killed before
// they closed their engine), and leaves those of live processes and anything else alone.
func TestScratchDirSweepsProcessesGone(t *testing.T) {
	gone, err := os.StartProcess(os.Args[0], []string{os.Args[0], "-test.run=^$"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Wait(); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	names := map[string]bool{ // name: kept
		scratchPrefix + strconv.Itoa(gone.Pid) + "-1":    false,
		scratchPrefix + strconv.Itoa(os.Getpid()) + "-2": true,
		scratchPrefix + "x-3":                            true,
		"other-4":                                        true,
	}
	for name := range names {
		if err := os.Mkdir(filepath.Join(parent, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sweepScratch(parent)
	for name, kept := range names {
		if _, err := os.Stat(filepath.Join(parent, name)); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", name, err == nil, kept)
		}
	}

	dir, err := scratchDir()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	want := os.TempDir()
	if m := memoryDir(); m != "" {
		want = m
	}
	if filepath.Dir(dir) != want {
		t.Errorf("engine directory %s, want one in %s", dir, want)
	}
	if prefix := scratchPrefix + strconv.Itoa(os.Getpid()) + "-"; len(filepath.Base(dir)) <= len(prefix) || filepath.Base(dir)[:len(prefix)] != prefix {
		t.Errorf("engine directory %s, want its name to begin %s", dir, prefix)
	}
}
