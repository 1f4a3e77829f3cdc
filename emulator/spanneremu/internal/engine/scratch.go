package engine

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// An engine without a data directory keeps its databases for its own lifetime only, as Google's
// emulator keeps them in memory. Its SQLite files go to a memory-backed file system when the
// machine has one with room (memoryDir): on a disk's file system every commit's write to the
// write-ahead log also costs the kernel's journaling and, later, its writeback, work no
// throwaway state needs. At 25 orders/s through the whole saga, /dev/shm against /tmp (ext4 on
// a virtual disk), three runs of each alternating: CPU per order 0.85 of the disk's, the
// services' falling nearly as much (README, "Performance").
//
// A process killed before it closes its engine leaves its directory behind, and in memory that
// holds RAM until the machine restarts: so the directory is named for the process
// (spanneremu-PID-*), and an engine that creates one removes those of processes that are gone.

// scratchPrefix begins the name of an engine's own directory; the process id follows.
const scratchPrefix = "spanneremu-"

// minMemoryRoom is the free space a memory-backed file system must have to hold an engine's
// databases: a container's /dev/shm is often 64 MiB, which a long run would fill.
const minMemoryRoom = 1 << 30

// scratchDir creates the directory of an engine without a data directory.
func scratchDir() (string, error) {
	parent := memoryDir()
	if parent != "" {
		sweepScratch(parent)
	}
	return os.MkdirTemp(parent, scratchPrefix+strconv.Itoa(os.Getpid())+"-")
}

// sweepScratch removes the engine directories in parent whose process is gone.
func sweepScratch(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), scratchPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, _, ok := strings.Cut(rest, "-")
		if n, err := strconv.Atoi(pid); ok && err == nil && n > 0 && !processAlive(n) {
			os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}
