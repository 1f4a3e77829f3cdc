package engine

import (
	"errors"
	"syscall"
)

// memoryDir is Linux's memory-backed /dev/shm when it has minMemoryRoom free, else "" (the
// system's temporary directory).
func memoryDir() string {
	const dir = "/dev/shm"
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Bavail*uint64(st.Bsize) < minMemoryRoom {
		return ""
	}
	return dir
}

// processAlive reports whether process pid exists (a process of another user counts).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
