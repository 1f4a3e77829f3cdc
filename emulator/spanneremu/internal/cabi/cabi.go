// Package cabi holds what Go code needs to extend the SQLite of modernc.org/sqlite, which is C
// transpiled to Go: a C function pointer there is the address of a Go func value, and C memory
// is addresses outside the Go heap. The emulator's page cache and VFS use it.
package cabi

import "unsafe"

// Func is the C function pointer of a Go function declared at top level, for a C struct of
// function pointers (sqlite3_pcache_methods2, sqlite3_io_methods, ...): the address of its func
// value, which for a top-level function is static. Its signature must be the transpiled C one
// (*libc.TLS first, then the C arguments as the generated code declares them). A closure's func
// value is not static: never pass one.
func Func[T any](f T) uintptr { return *(*uintptr)(unsafe.Pointer(&f)) }

// Call turns a C function pointer (a Func, or one SQLite provides) into a Go function of type T.
func Call[T any](fp uintptr) T { return *(*T)(unsafe.Pointer(&fp)) }

// At is the pointer for C memory at p (libc's allocations, SQLite's structures): the collector
// ignores such addresses.
func At(p uintptr) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(nil), p) }
