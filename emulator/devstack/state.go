package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spanmart/spanmart/internal/localenv"
)

// markerFile marks a directory as a dev stack state directory, so that -clean never removes a
// directory the devstack did not create (a mistyped -state-dir of $HOME, say).
const markerFile = ".devstack"

// findRepo returns the root of the spanmart module containing the working directory. The devstack
// builds binaries from source, so it has to know where the source is.
func findRepo() (string, error) { return localenv.RepoRoot() }

// stateLayout names the directories under the state directory.
type stateLayout struct{ root string }

func (s stateLayout) bin() string            { return filepath.Join(s.root, "bin") }
func (s stateLayout) logs() string           { return filepath.Join(s.root, "logs") }
func (s stateLayout) spanner() string        { return filepath.Join(s.root, "spanner") }
func (s stateLayout) tasks() string          { return filepath.Join(s.root, "tasks") }
func (s stateLayout) paysim() string         { return filepath.Join(s.root, "paysim") }
func (s stateLayout) mail() string           { return filepath.Join(s.root, "mail") }
func (s stateLayout) auth() string           { return filepath.Join(s.root, "auth") }
func (s stateLayout) lock() string           { return filepath.Join(s.root, "devstack.lock") }
func (s stateLayout) log(name string) string { return filepath.Join(s.logs(), name+".log") }

// prepare creates the state directory tree and marks it as ours.
func (s stateLayout) prepare() error {
	if entries, err := os.ReadDir(s.root); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(s.root, markerFile)); err != nil {
			return fmt.Errorf("state directory %s exists, is not empty and was not created by the devstack (no %s file): choose another -state-dir", s.root, markerFile)
		}
	}
	for _, d := range []string{s.root, s.bin(), s.logs(), s.spanner(), s.tasks(), s.paysim(), s.mail(), s.auth()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create state directory: %w", err)
		}
	}
	marker := filepath.Join(s.root, markerFile)
	if _, err := os.Stat(marker); errors.Is(err, fs.ErrNotExist) {
		note := "This directory holds the state of the Spanmart dev stack (emulator data, logs, binaries).\nRemove it with: go run ./emulator/devstack -clean\n"
		if err := os.WriteFile(marker, []byte(note), 0o644); err != nil {
			return fmt.Errorf("create state directory: %w", err)
		}
	}
	return nil
}

// cleanState removes the state directory, refusing while a dev stack is using it.
func cleanState(dir string) error {
	s := stateLayout{root: dir}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		fmt.Printf("devstack | nothing to clean: %s does not exist\n", dir)
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, markerFile)); err != nil {
		return fmt.Errorf("refusing to remove %s: it has no %s file, so the devstack did not create it", dir, markerFile)
	}
	unlock, err := lockState(s)
	if err != nil {
		return fmt.Errorf("cannot clean: %w", err)
	}
	unlock()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	fmt.Printf("devstack | removed %s (databases, queues, tasks, logs and binaries); the next start begins from scratch\n", dir)
	return nil
}

// lockState takes an exclusive lock on the state directory so that two dev stacks never share one
// set of emulator files (the second would corrupt the first's databases). The kernel drops the lock
// when the process dies, so a crashed devstack never leaves a stale lock behind. The file records
// the holder's pid for the error message.
func lockState(s stateLayout) (unlock func(), err error) {
	f, err := os.OpenFile(s.lock(), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := flock(f); err != nil {
		holder := "another devstack"
		if sc := bufio.NewScanner(f); sc.Scan() && sc.Text() != "" {
			holder += " (pid " + sc.Text() + ")"
		}
		f.Close()
		return nil, fmt.Errorf("state directory %s is in use by %s: stop it first, or pass another -state-dir (and -port-offset) to run a second stack", s.root, holder)
	}
	f.Truncate(0)
	f.WriteAt([]byte(fmt.Sprintf("%d\n", os.Getpid())), 0)
	return func() { f.Close() }, nil
}
