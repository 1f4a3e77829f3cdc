package cabi

import (
	"sync"
	"sync/atomic"
)

// Table maps the handles C code keeps for Go values (SQLite's sqlite3_pcache*, a file's id) to
// those values: a handle is a small integer from 1 (0 stays "none"), which C never dereferences.
// Get, on every call from C, reads a copy-on-write slice without a lock; Add and Remove (a
// connection or a file opening or closing) copy it under a mutex and reuse freed handles. The
// zero Table is empty and ready.
type Table[T any] struct {
	mu    sync.Mutex
	list  atomic.Pointer[[]*T]
	freed []uintptr
}

// Add files v and returns its handle.
func (t *Table[T]) Add(v *T) uintptr {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.copyLocked()
	var h uintptr
	if n := len(t.freed); n > 0 {
		h, t.freed = t.freed[n-1], t.freed[:n-1]
		list[h-1] = v
	} else {
		list = append(list, v)
		h = uintptr(len(list))
	}
	t.list.Store(&list)
	return h
}

// Get is the value of handle h, which Add returned and Remove has not freed.
func (t *Table[T]) Get(h uintptr) *T { return (*t.list.Load())[h-1] }

// Remove frees handle h.
func (t *Table[T]) Remove(h uintptr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := t.copyLocked()
	list[h-1] = nil
	t.list.Store(&list)
	t.freed = append(t.freed, h)
}

// All is every value filed now.
func (t *Table[T]) All() []*T {
	var all []*T
	if list := t.list.Load(); list != nil {
		for _, v := range *list {
			if v != nil {
				all = append(all, v)
			}
		}
	}
	return all
}

func (t *Table[T]) copyLocked() []*T {
	if list := t.list.Load(); list != nil {
		return append([]*T(nil), *list...)
	}
	return nil
}
