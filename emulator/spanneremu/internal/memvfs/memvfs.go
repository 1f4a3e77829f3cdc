// Package memvfs is a SQLite VFS that keeps the contents of database and WAL files in the
// process's memory, for an emulator whose databases end with the process.
//
// Why: an emulator without a data directory keeps its SQLite files in /dev/shm, yet every page
// SQLite reads or writes was still a system call: a WAL frame is two pwrite calls (its header, its
// page), and a pooled connection, whose page cache is thrown away whenever another connection
// commits, reads every page again with pread. At 25 orders/s that was some 16,000 calls a second
// (README, "Performance"), several of them inside each commit's hold of the write lock. Here those
// reads and writes are copies between the file's memory and SQLite's buffers.
//
// Everything else is SQLite's "unix-excl" VFS's, called on the file it opened: the files exist
// on disk, empty, so locking and the WAL protocol are SQLite's own, unchanged. unix-excl is the
// unix VFS with one difference: at its first lock, the process takes an exclusive fcntl lock on
// the database file, and from then on SQLite arbitrates its connections' locks in the process's
// memory, and keeps the WAL index (the -shm) in its heap rather than in a file mapped into
// memory. Why: a database whose contents are this process's memory has no other process to
// share it with, yet the default VFS made a system call (fcntl) for most WAL-index lock and
// unlock, some of them inside each commit's hold of the emulator's write lock: 2.6 % of the CPU
// of Spanmart's bench process (load generator and both emulators) at 25 orders/s (README,
// "Performance"). Only the main database and WAL files are
// held in memory; journals and temporary files go to disk as before.
// A file's contents go when SQLite deletes it (a WAL at its last connection's close) or with
// Remove and RemoveDir. They are Go memory, in chunks the collector does not scan: the heap of an
// emulator in memory holds its databases, as /dev/shm held them before.
package memvfs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/cabi"
)

// Name is the VFS's name, for a DSN's vfs parameter.
const Name = "spanneremu-mem"

// chunkSize is the unit a file grows by: a file is a list of chunks, so growing never copies.
const chunkSize = 64 << 10

// file is the contents of one file.
type file struct {
	mu     sync.RWMutex
	chunks [][]byte
	size   int64
}

// files maps a path to its contents.
var files struct {
	mu sync.Mutex
	m  map[string]*file
}

// handle is SQLite's sqlite3_file for a file of this VFS: its io methods, the file's id in
// handles (0: a file held on disk, every call forwarded), then unix-excl's own sqlite3_file.
type handle struct {
	methods uintptr
	id      uintptr
}

const handleSize = unsafe.Sizeof(handle{})

// handles maps a handle's id to its file.
var handles cabi.Table[file]

var (
	unixVFS      *sqlite3.Tsqlite3_vfs // unix-excl
	unixFileSize uintptr               // szOsFile of unix-excl
	ioMethods    uintptr               // our sqlite3_io_methods
)

func handleOf(p uintptr) *handle { return (*handle)(cabi.At(p)) }

// inner is unix-excl's sqlite3_file inside ours.
func inner(p uintptr) uintptr { return p + handleSize }

// Register registers the VFS (once; later calls return the first call's result). It initialises
// SQLite, so it must come after anything configured before initialisation (a page cache).
var Register = sync.OnceValue(register)

func register() error {
	tls := libc.NewTLS()
	defer tls.Close()
	files.m = map[string]*file{}
	exclName, err := libc.CString("unix-excl")
	if err != nil {
		return errors.New("memvfs: out of memory")
	}
	defer libc.Xfree(tls, exclName)
	excl := sqlite3.Xsqlite3_vfs_find(tls, exclName)
	if excl == 0 {
		return errors.New("memvfs: SQLite has no unix-excl VFS")
	}
	unixVFS = (*sqlite3.Tsqlite3_vfs)(cabi.At(excl))
	unixFileSize = uintptr(unixVFS.FszOsFile)
	vfs := libc.Xcalloc(tls, 1, types.Size_t(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})))
	name, err := libc.CString(Name)
	if vfs == 0 || err != nil {
		return errors.New("memvfs: out of memory")
	}
	v := (*sqlite3.Tsqlite3_vfs)(cabi.At(vfs))
	*v = *unixVFS
	v.FpNext = 0
	v.FzName = name
	v.FszOsFile = int32((handleSize + unixFileSize + 7) &^ 7)
	v.FxOpen = cabi.Func(xOpen)
	v.FxDelete = cabi.Func(xDelete)
	methods := libc.Xcalloc(tls, 1, types.Size_t(unsafe.Sizeof(sqlite3.Tsqlite3_io_methods{})))
	if methods == 0 {
		return errors.New("memvfs: out of memory")
	}
	m := (*sqlite3.Tsqlite3_io_methods)(cabi.At(methods))
	m.FiVersion = 3
	m.FxClose = cabi.Func(xClose)
	m.FxRead = cabi.Func(xRead)
	m.FxWrite = cabi.Func(xWrite)
	m.FxTruncate = cabi.Func(xTruncate)
	m.FxSync = cabi.Func(xSync)
	m.FxFileSize = cabi.Func(xFileSize)
	m.FxLock = cabi.Func(xLock)
	m.FxUnlock = cabi.Func(xUnlock)
	m.FxCheckReservedLock = cabi.Func(xCheckReservedLock)
	m.FxFileControl = cabi.Func(xFileControl)
	m.FxSectorSize = cabi.Func(xSectorSize)
	m.FxDeviceCharacteristics = cabi.Func(xDeviceCharacteristics)
	m.FxShmMap = cabi.Func(xShmMap)
	m.FxShmLock = cabi.Func(xShmLock)
	m.FxShmBarrier = cabi.Func(xShmBarrier)
	m.FxShmUnmap = cabi.Func(xShmUnmap)
	m.FxFetch = cabi.Func(xFetch)
	m.FxUnfetch = cabi.Func(xUnfetch)
	ioMethods = methods
	if rc := sqlite3.Xsqlite3_vfs_register(tls, vfs, 0); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("memvfs: sqlite3_vfs_register returned %d", rc)
	}
	return nil
}

// Size is the size of a file held in memory, and whether it is.
func Size(path string) (int64, bool) {
	files.mu.Lock()
	f := files.m[path]
	files.mu.Unlock()
	if f == nil {
		return 0, false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.size, true
}

// Remove drops the contents of the files at paths (the emulator removing a database's files).
func Remove(paths ...string) {
	files.mu.Lock()
	defer files.mu.Unlock()
	for _, path := range paths {
		delete(files.m, path)
	}
}

// RemoveDir drops the contents of every file in dir (the emulator removing its directory).
func RemoveDir(dir string) {
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	files.mu.Lock()
	defer files.mu.Unlock()
	for path := range files.m {
		if strings.HasPrefix(path, prefix) {
			delete(files.m, path)
		}
	}
}

func lookup(p uintptr) *file {
	id := handleOf(p).id
	if id == 0 {
		return nil
	}
	return handles.Get(id)
}

func xOpen(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	h := handleOf(pFile)
	h.methods, h.id = 0, 0
	open := cabi.Call[func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32](unixVFS.FxOpen)
	if rc := open(tls, uintptr(unsafe.Pointer(unixVFS)), zName, inner(pFile), flags, pOutFlags); rc != sqlite3.SQLITE_OK {
		return rc
	}
	h.methods = ioMethods
	if zName == 0 || flags&(sqlite3.SQLITE_OPEN_MAIN_DB|sqlite3.SQLITE_OPEN_WAL) == 0 {
		return sqlite3.SQLITE_OK
	}
	path := libc.GoString(zName)
	files.mu.Lock()
	f := files.m[path]
	if f == nil {
		f = &file{}
		files.m[path] = f
	}
	files.mu.Unlock()
	h.id = handles.Add(f)
	return sqlite3.SQLITE_OK
}

func xDelete(tls *libc.TLS, pVfs, zName uintptr, syncDir int32) int32 {
	files.mu.Lock()
	delete(files.m, libc.GoString(zName))
	files.mu.Unlock()
	del := cabi.Call[func(*libc.TLS, uintptr, uintptr, int32) int32](unixVFS.FxDelete)
	return del(tls, uintptr(unsafe.Pointer(unixVFS)), zName, syncDir)
}

// methodsOf is unix-excl's io methods of the file inside ours.
func methodsOf(p uintptr) *sqlite3.Tsqlite3_io_methods {
	return (*sqlite3.Tsqlite3_io_methods)(cabi.At(*(*uintptr)(cabi.At(inner(p)))))
}

func xClose(tls *libc.TLS, p uintptr) int32 {
	h := handleOf(p)
	if h.id != 0 {
		handles.Remove(h.id)
		h.id = 0
	}
	return cabi.Call[func(*libc.TLS, uintptr) int32](methodsOf(p).FxClose)(tls, inner(p))
}

func xRead(tls *libc.TLS, p, buf uintptr, n int32, off int64) int32 {
	f := lookup(p)
	if f == nil {
		return cabi.Call[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](methodsOf(p).FxRead)(tls, inner(p), buf, n, off)
	}
	dst := unsafe.Slice((*byte)(cabi.At(buf)), n)
	f.mu.RLock()
	got := f.readAt(dst, off)
	f.mu.RUnlock()
	if got < len(dst) {
		clear(dst[got:])
		return sqlite3.SQLITE_IOERR_SHORT_READ
	}
	return sqlite3.SQLITE_OK
}

// readAt copies the bytes from off into dst and returns how many there were.
func (f *file) readAt(dst []byte, off int64) int {
	if off >= f.size {
		return 0
	}
	n := min(int64(len(dst)), f.size-off)
	for done := int64(0); done < n; {
		c, o := (off+done)/chunkSize, (off+done)%chunkSize
		done += int64(copy(dst[done:n], f.chunks[c][o:]))
	}
	return int(n)
}

func xWrite(tls *libc.TLS, p, buf uintptr, n int32, off int64) int32 {
	f := lookup(p)
	if f == nil {
		return cabi.Call[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](methodsOf(p).FxWrite)(tls, inner(p), buf, n, off)
	}
	f.mu.Lock()
	f.writeAt(unsafe.Slice((*byte)(cabi.At(buf)), n), off)
	f.mu.Unlock()
	return sqlite3.SQLITE_OK
}

// writeAt copies src into the file at off, growing it (with zeros up to off) as needed.
func (f *file) writeAt(src []byte, off int64) {
	end := off + int64(len(src))
	for int64(len(f.chunks))*chunkSize < end {
		f.chunks = append(f.chunks, make([]byte, chunkSize))
	}
	for done := int64(0); done < int64(len(src)); {
		c, o := (off+done)/chunkSize, (off+done)%chunkSize
		done += int64(copy(f.chunks[c][o:], src[done:]))
	}
	f.size = max(f.size, end)
}

func xTruncate(tls *libc.TLS, p uintptr, size int64) int32 {
	f := lookup(p)
	if f == nil {
		return cabi.Call[func(*libc.TLS, uintptr, int64) int32](methodsOf(p).FxTruncate)(tls, inner(p), size)
	}
	f.mu.Lock()
	f.truncate(size)
	f.mu.Unlock()
	return sqlite3.SQLITE_OK
}

// truncate cuts the file to size (it never grows it: SQLite extends a file by writing).
func (f *file) truncate(size int64) {
	if size >= f.size {
		return
	}
	// The bytes past size must read as zeros if the file grows again: clear them in the last
	// chunk kept, and drop the chunks after it.
	keep := (size + chunkSize - 1) / chunkSize
	if o := size % chunkSize; o != 0 {
		clear(f.chunks[keep-1][o:])
	}
	clear(f.chunks[keep:])
	f.chunks = f.chunks[:keep]
	f.size = size
}

func xSync(tls *libc.TLS, p uintptr, flags int32) int32 {
	if lookup(p) != nil {
		return sqlite3.SQLITE_OK // nothing outlives the process
	}
	return cabi.Call[func(*libc.TLS, uintptr, int32) int32](methodsOf(p).FxSync)(tls, inner(p), flags)
}

func xFileSize(tls *libc.TLS, p, pSize uintptr) int32 {
	f := lookup(p)
	if f == nil {
		return cabi.Call[func(*libc.TLS, uintptr, uintptr) int32](methodsOf(p).FxFileSize)(tls, inner(p), pSize)
	}
	f.mu.RLock()
	*(*int64)(cabi.At(pSize)) = f.size
	f.mu.RUnlock()
	return sqlite3.SQLITE_OK
}

func xLock(tls *libc.TLS, p uintptr, lock int32) int32 {
	return cabi.Call[func(*libc.TLS, uintptr, int32) int32](methodsOf(p).FxLock)(tls, inner(p), lock)
}

func xUnlock(tls *libc.TLS, p uintptr, lock int32) int32 {
	return cabi.Call[func(*libc.TLS, uintptr, int32) int32](methodsOf(p).FxUnlock)(tls, inner(p), lock)
}

func xCheckReservedLock(tls *libc.TLS, p, pResOut uintptr) int32 {
	return cabi.Call[func(*libc.TLS, uintptr, uintptr) int32](methodsOf(p).FxCheckReservedLock)(tls, inner(p), pResOut)
}

func xFileControl(tls *libc.TLS, p uintptr, op int32, pArg uintptr) int32 {
	if op == sqlite3.SQLITE_FCNTL_SIZE_HINT && lookup(p) != nil {
		return sqlite3.SQLITE_OK // the file on disk stays empty
	}
	return cabi.Call[func(*libc.TLS, uintptr, int32, uintptr) int32](methodsOf(p).FxFileControl)(tls, inner(p), op, pArg)
}

func xSectorSize(tls *libc.TLS, p uintptr) int32 {
	return cabi.Call[func(*libc.TLS, uintptr) int32](methodsOf(p).FxSectorSize)(tls, inner(p))
}

func xDeviceCharacteristics(tls *libc.TLS, p uintptr) int32 {
	return cabi.Call[func(*libc.TLS, uintptr) int32](methodsOf(p).FxDeviceCharacteristics)(tls, inner(p))
}

func xShmMap(tls *libc.TLS, p uintptr, region, size, extend int32, pp uintptr) int32 {
	return cabi.Call[func(*libc.TLS, uintptr, int32, int32, int32, uintptr) int32](methodsOf(p).FxShmMap)(tls, inner(p), region, size, extend, pp)
}

func xShmLock(tls *libc.TLS, p uintptr, offset, n, flags int32) int32 {
	return cabi.Call[func(*libc.TLS, uintptr, int32, int32, int32) int32](methodsOf(p).FxShmLock)(tls, inner(p), offset, n, flags)
}

func xShmBarrier(tls *libc.TLS, p uintptr) {
	cabi.Call[func(*libc.TLS, uintptr)](methodsOf(p).FxShmBarrier)(tls, inner(p))
}

func xShmUnmap(tls *libc.TLS, p uintptr, deleteFlag int32) int32 {
	return cabi.Call[func(*libc.TLS, uintptr, int32) int32](methodsOf(p).FxShmUnmap)(tls, inner(p), deleteFlag)
}

// xFetch maps no page of a file held in memory (the emulator runs with mmap_size 0 anyway): *pp
// = NULL tells SQLite to read the page instead.
func xFetch(tls *libc.TLS, p uintptr, off int64, n int32, pp uintptr) int32 {
	if lookup(p) != nil {
		*(*uintptr)(cabi.At(pp)) = 0
		return sqlite3.SQLITE_OK
	}
	return cabi.Call[func(*libc.TLS, uintptr, int64, int32, uintptr) int32](methodsOf(p).FxFetch)(tls, inner(p), off, n, pp)
}

func xUnfetch(tls *libc.TLS, p uintptr, off int64, pPage uintptr) int32 {
	if lookup(p) != nil {
		return sqlite3.SQLITE_OK
	}
	return cabi.Call[func(*libc.TLS, uintptr, int64, uintptr) int32](methodsOf(p).FxUnfetch)(tls, inner(p), off, pPage)
}
