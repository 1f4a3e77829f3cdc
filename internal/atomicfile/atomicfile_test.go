package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Write creates a file, replaces its content whole, and leaves no temporary file behind; a write
// that cannot happen (no such directory) leaves nothing either.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, content := range []string{`{"v":1}`, `{"v":2,"longer":true}`, `{}`} {
		if err := Write(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("after writing %s: %q %v", content, got, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("directory holds %v (%v), want only the file", entries, err)
	}
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x")); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("the failed write left %v", err)
	}
}
