//go:build !linux

package engine

// memoryDir is "" outside Linux: the system's temporary directory holds an engine's files.
func memoryDir() string { return "" }

// processAlive is not asked outside Linux (no memory directory is swept).
func processAlive(int) bool { return true }
