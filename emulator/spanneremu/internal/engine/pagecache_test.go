package engine

import (
	"strconv"
	"testing"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/pagecache"
)

// The engine installs its own page cache at init (engine.go): its connections' pages must come
// from it, and a read on a pooled connection after another connection's commit (which throws
// that connection's cache away) must make its pages from the blocks it kept.
func TestConnectionsUseTheEnginePageCache(t *testing.T) {
	before := pagecache.ReadStats()
	_, db := newTestEngine(t, Options{NoHistory: true}, `CREATE TABLE Singers (SingerId INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (SingerId)`)
	cols := []string{"SingerId", "Name"}
	for i := range 20 {
		if err := commit(t, db, insert("Singers", cols, row(str(strconv.Itoa(i)), str("name")))); err != nil {
			t.Fatal(err)
		}
		// A read-only transaction reads on a pooled connection, after the writer's commit.
		ro, err := db.Begin(TxnOptions{Mode: ReadOnly})
		if err != nil {
			t.Fatal(err)
		}
		read(t, ro, "Singers", str(strconv.Itoa(i)))
		ro.Rollback()
	}
	after := pagecache.ReadStats()
	if after.Caches == 0 || after.Allocs == before.Allocs {
		t.Fatalf("the engine's connections did not use the page cache: stats before %+v, after %+v", before, after)
	}
	if after.Reused == before.Reused {
		t.Errorf("no page was made from a kept block: stats before %+v, after %+v", before, after)
	}
}
