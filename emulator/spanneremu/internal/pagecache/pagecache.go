// Package pagecache is the SQLite page cache of the Spanner emulator: one cache per connection,
// with nothing shared between them, installed in place of SQLite's own (pcache1) through
// SQLITE_CONFIG_PCACHE2.
//
// Why: modernc.org/sqlite is built with SQLITE_ENABLE_MEMORY_MANAGEMENT, which makes pcache1
// keep the pages of every connection of the process in one group behind one mutex, and allocate
// and free each page through libc's allocator, which has one mutex of its own. A WAL-mode
// connection throws its cache away whenever it starts a read after another connection committed
// (pager_reset), so under a steady stream of commits nearly every read fetches its pages anew:
// every fetch, unpin and truncate of every connection went through those two mutexes. Traced at
// 50 orders/s, a commit holding its database's write lock spent 31 % of the hold waiting for a
// processor, nearly all of it at the unlock of one of them (a Go mutex in starvation mode hands
// itself to its waiter, and the unlocking goroutine, the lock holder, yields).
//
// Here each connection's cache is its own: a Go map from page number to page, an LRU list of
// unpinned pages, and a free list of page buffers the connection reuses after its cache was
// thrown away, so a connection's steady state allocates nothing and takes no lock. SQLite
// serialises the calls on one cache (its connection's mutex), so a cache needs no lock of its own;
// the engine opens no shared-cache connections, the one mode in which two connections would
// share a cache.
//
// The rules for when a page may be created, recycled or dropped are pcache1's, for a cache of
// its own: see xFetch and xUnpin below. Spanmart's README ("Performance") has what it changed.
package pagecache

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/cabi"
)

// header follows the page buffer in a page's block of C memory; its first two fields are the
// sqlite3_pcache_page SQLite reads (pBuf, pExtra), and a pointer to it is the page's handle.
// Everything must live outside the Go heap: SQLite keeps these addresses in its own structures.
type header struct {
	buf, extra uintptr
	key        uint32
	pinned     uint32
	prev, next uintptr // the LRU list while unpinned; next links the free list
}

const headerSize = unsafe.Sizeof(header{})

func hdr(p uintptr) *header { return (*header)(cabi.At(p)) }

// cache is one connection's page cache.
type cache struct {
	szPage    int
	block     types.Size_t
	purgeable bool
	// max is the cache size SQLite asked for (PRAGMA cache_size, in pages); max90 is 90 % of it,
	// the pinned pages beyond which a fetch that need not succeed (createFlag 1) is refused so that
	// SQLite spills a dirty page first.
	max, max90 int
	pages      map[uint32]uintptr
	maxKey     uint32 // no key above it is in pages
	recyclable int    // unpinned pages, all on the LRU list
	lruHead    uintptr
	lruTail    uintptr // the least recently unpinned page
	free       uintptr // blocks kept for reuse, linked through next
	nFree      int
	// allocs and reused count the blocks taken from libc and from the free list, rekeys the pages
	// filed under a new key; each cache has its own, so that no cache line is shared between
	// connections.
	allocs, reused, rekeys atomic.Int64
}

// Stats counts what the caches of the process did, summed over the caches alive and those gone.
// Tests use it to see that connections go through this cache and reuse its blocks.
type Stats struct {
	Caches int   // caches alive
	Allocs int64 // page blocks taken from libc's allocator
	Reused int64 // pages made from a block a cache kept
	Rekeys int64 // pages SQLite moved to another page number (auto-vacuum)
}

// caches maps SQLite's handle of a cache (sqlite3_pcache*) to the cache.
var caches cabi.Table[cache]

// gone sums the counters of the caches destroyed; mu orders that against ReadStats.
var gone struct {
	mu                     sync.Mutex
	allocs, reused, rekeys int64
}

// Install makes this the page cache of every SQLite connection the process opens afterwards. It
// must run before the process opens its first SQLite connection (SQLite takes a page cache only
// before it is initialised); the engine calls it from its init. Later calls return the first
// one's result.
var Install = sync.OnceValue(install)

func install() error {
	tls := libc.NewTLS()
	defer tls.Close()
	methods := libc.Xcalloc(tls, 1, types.Size_t(unsafe.Sizeof(sqlite3.Tsqlite3_pcache_methods2{})))
	if methods == 0 {
		return errors.New("pagecache: out of memory")
	}
	// SQLite copies the methods at sqlite3_config; the block can go once it returns.
	defer libc.Xfree(tls, methods)
	m := (*sqlite3.Tsqlite3_pcache_methods2)(cabi.At(methods))
	m.FiVersion = 1
	m.FxInit = cabi.Func(xInit)
	m.FxShutdown = cabi.Func(xShutdown)
	m.FxCreate = cabi.Func(xCreate)
	m.FxCachesize = cabi.Func(xCachesize)
	m.FxPagecount = cabi.Func(xPagecount)
	m.FxFetch = cabi.Func(xFetch)
	m.FxUnpin = cabi.Func(xUnpin)
	m.FxRekey = cabi.Func(xRekey)
	m.FxTruncate = cabi.Func(xTruncate)
	m.FxDestroy = cabi.Func(xDestroy)
	m.FxShrink = cabi.Func(xShrink)
	args := libc.Xmalloc(tls, types.Size_t(unsafe.Sizeof(uintptr(0))))
	if args == 0 {
		return errors.New("pagecache: out of memory")
	}
	defer libc.Xfree(tls, args)
	// pcache1 still allocates the b-tree's scratch pages (sqlite3PageMalloc) behind a mutex its
	// xInit creates; SQLite calls only the installed cache's xInit, so xInit calls pcache1's.
	orig := libc.Xcalloc(tls, 1, types.Size_t(unsafe.Sizeof(sqlite3.Tsqlite3_pcache_methods2{})))
	if orig == 0 {
		return errors.New("pagecache: out of memory")
	}
	defer libc.Xfree(tls, orig)
	if rc := sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_GETPCACHE2, libc.VaList(args, orig)); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("pagecache: sqlite3_config(SQLITE_CONFIG_GETPCACHE2) returned %d", rc)
	}
	pcache1 = *(*sqlite3.Tsqlite3_pcache_methods2)(cabi.At(orig))
	if rc := sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_PCACHE2, libc.VaList(args, methods)); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("pagecache: sqlite3_config(SQLITE_CONFIG_PCACHE2) returned %d (is a connection open already?)", rc)
	}
	return nil
}

// ReadStats sums the counters of every cache.
func ReadStats() Stats {
	gone.mu.Lock()
	defer gone.mu.Unlock()
	s := Stats{Allocs: gone.allocs, Reused: gone.reused, Rekeys: gone.rekeys}
	for _, c := range caches.All() {
		s.Caches++
		s.Allocs += c.allocs.Load()
		s.Reused += c.reused.Load()
		s.Rekeys += c.rekeys.Load()
	}
	return s
}

// pcache1 is SQLite's own page cache, whose xInit and xShutdown these run.
var pcache1 sqlite3.Tsqlite3_pcache_methods2

func xInit(tls *libc.TLS, arg uintptr) int32 {
	return cabi.Call[func(*libc.TLS, uintptr) int32](pcache1.FxInit)(tls, pcache1.FpArg)
}

func xShutdown(tls *libc.TLS, arg uintptr) {
	cabi.Call[func(*libc.TLS, uintptr)](pcache1.FxShutdown)(tls, pcache1.FpArg)
}

func xCreate(tls *libc.TLS, szPage, szExtra, bPurgeable int32) uintptr {
	extra := (uintptr(szExtra) + 7) &^ 7
	c := &cache{
		szPage:    int(szPage),
		block:     types.Size_t(uintptr(szPage) + headerSize + extra),
		purgeable: bPurgeable != 0,
		pages:     map[uint32]uintptr{},
	}
	return caches.Add(c)
}

func xCachesize(tls *libc.TLS, h uintptr, n int32) {
	c := caches.Get(h)
	if !c.purgeable {
		return
	}
	c.max, c.max90 = int(n), int(n)*9/10
	for len(c.pages) > c.max && c.lruTail != 0 {
		c.drop(tls, c.lruTail)
	}
}

func xPagecount(tls *libc.TLS, h uintptr) int32 { return int32(len(caches.Get(h).pages)) }

// xFetch returns the page of key, pinned. For a page not in the cache, createFlag 0 asks only to
// look; 1 to create it if that is easy, which (as pcache1) it is not once 90 % of the cache is
// pinned: SQLite then spills a dirty page and asks again with 2, which must create it if memory
// allows. A purgeable cache that is full recycles its least recently unpinned page.
func xFetch(tls *libc.TLS, h uintptr, key uint32, createFlag int32) uintptr {
	c := caches.Get(h)
	if p, ok := c.pages[key]; ok {
		if hdr(p).pinned == 0 {
			c.lruRemove(p)
		}
		return p
	}
	if createFlag == 0 {
		return 0
	}
	if createFlag == 1 && c.purgeable && len(c.pages)-c.recyclable >= c.max90 {
		return 0
	}
	var p uintptr
	if c.purgeable && c.lruTail != 0 && len(c.pages)+1 >= c.max {
		p = c.lruTail
		c.lruRemove(p)
		delete(c.pages, hdr(p).key)
	} else if p = c.alloc(tls); p == 0 {
		return 0
	}
	ph := hdr(p)
	ph.key, ph.pinned = key, 1
	// SQLite takes a page whose extra begins with a null pointer for one it has not seen (the
	// PgHdr it keeps there is initialised afresh); pcache1 clears the same word.
	*(*uintptr)(cabi.At(ph.extra)) = 0
	c.pages[key] = p
	c.maxKey = max(c.maxKey, key)
	return p
}

// xUnpin: SQLite is done with the page for now. It goes to the LRU list, unless SQLite says it
// will not need it again or the cache is over its size, when it is dropped.
func xUnpin(tls *libc.TLS, h, p uintptr, discard int32) {
	c := caches.Get(h)
	if discard != 0 || (c.purgeable && len(c.pages) > c.max) {
		c.drop(tls, p)
		return
	}
	ph := hdr(p)
	ph.pinned = 0
	ph.prev, ph.next = 0, c.lruHead
	if c.lruHead != 0 {
		hdr(c.lruHead).prev = p
	} else {
		c.lruTail = p
	}
	c.lruHead = p
	c.recyclable++
}

// xRekey files page p under a new key; SQLite has dropped any page at newKey before it asks.
func xRekey(tls *libc.TLS, h, p uintptr, oldKey, newKey uint32) {
	c := caches.Get(h)
	if q, ok := c.pages[newKey]; ok && q != p {
		c.drop(tls, q)
	}
	delete(c.pages, oldKey)
	hdr(p).key = newKey
	c.pages[newKey] = p
	c.maxKey = max(c.maxKey, newKey)
	c.rekeys.Add(1)
}

// xTruncate drops every page whose key is limit or more, pinned or not. A truncate to 1 or 2 is
// how a connection throws its cache away after another one committed (sqlite3PcacheClear), so it
// is the common case; maxKey spares the walk when nothing is at or above limit.
func xTruncate(tls *libc.TLS, h uintptr, limit uint32) {
	c := caches.Get(h)
	if len(c.pages) == 0 || limit > c.maxKey {
		return
	}
	for key, p := range c.pages {
		if key >= limit {
			c.drop(tls, p)
		}
	}
	c.maxKey = 0
	if limit > 0 {
		c.maxKey = limit - 1
	}
}

func xDestroy(tls *libc.TLS, h uintptr) {
	c := caches.Get(h)
	for _, p := range c.pages {
		libc.Xfree(tls, hdr(p).buf)
	}
	c.pages = nil
	c.freeAll(tls)
	gone.mu.Lock()
	defer gone.mu.Unlock()
	gone.allocs += c.allocs.Load()
	gone.reused += c.reused.Load()
	gone.rekeys += c.rekeys.Load()
	caches.Remove(h)
}

// xShrink is SQLite asking for memory back (sqlite3_release_memory): the unpinned pages and the
// kept blocks go back to libc.
func xShrink(tls *libc.TLS, h uintptr) {
	c := caches.Get(h)
	for c.lruTail != 0 {
		c.drop(tls, c.lruTail)
	}
	c.freeAll(tls)
}

// alloc returns a block for a new page: a kept one, else a new one from libc.
func (c *cache) alloc(tls *libc.TLS) uintptr {
	if p := c.free; p != 0 {
		c.free, c.nFree = hdr(p).next, c.nFree-1
		c.reused.Add(1)
		return p
	}
	b := libc.Xmalloc(tls, c.block)
	if b == 0 {
		return 0
	}
	c.allocs.Add(1)
	p := b + uintptr(c.szPage)
	ph := hdr(p)
	ph.buf, ph.extra = b, p+headerSize
	return p
}

// drop takes page p out of the cache, pinned or not, and keeps its block for the next page while
// the cache keeps fewer blocks than its size (a purgeable cache; an in-memory database's cache
// frees at once).
func (c *cache) drop(tls *libc.TLS, p uintptr) {
	ph := hdr(p)
	if ph.pinned == 0 {
		c.lruRemove(p)
	}
	delete(c.pages, ph.key)
	if c.purgeable && c.nFree < c.max {
		ph.next, c.free, c.nFree = c.free, p, c.nFree+1
		return
	}
	libc.Xfree(tls, ph.buf)
}

// lruRemove unlinks an unpinned page from the LRU list and counts it pinned.
func (c *cache) lruRemove(p uintptr) {
	ph := hdr(p)
	if ph.prev != 0 {
		hdr(ph.prev).next = ph.next
	} else {
		c.lruHead = ph.next
	}
	if ph.next != 0 {
		hdr(ph.next).prev = ph.prev
	} else {
		c.lruTail = ph.prev
	}
	ph.prev, ph.next = 0, 0
	ph.pinned = 1
	c.recyclable--
}

func (c *cache) freeAll(tls *libc.TLS) {
	for c.free != 0 {
		p := c.free
		c.free = hdr(p).next
		libc.Xfree(tls, hdr(p).buf)
	}
	c.nFree = 0
}
