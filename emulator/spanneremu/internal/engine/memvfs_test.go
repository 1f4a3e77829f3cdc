package engine

import (
	"os"
	"testing"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/memvfs"
)

// An engine without a data directory keeps its databases' contents in memory (memvfs), its files
// on disk empty; one with a data directory keeps them on disk, where they outlive it.
func TestFilesInMemoryOnlyWithoutADataDirectory(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     Options
		inMemory bool
	}{
		{"without a data directory", Options{}, true},
		{"with a data directory", Options{DataDir: t.TempDir()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, db := newTestEngine(t, tc.opts, `CREATE TABLE Singers (SingerId INT64 NOT NULL, Name STRING(MAX)) PRIMARY KEY (SingerId)`)
			if err := commit(t, db, insert("Singers", []string{"SingerId", "Name"}, row(str("1"), str("name")))); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(db.path)
			if err != nil {
				t.Fatal(err)
			}
			size, inMemory := memvfs.Size(db.path)
			if inMemory != tc.inMemory || (inMemory && (size == 0 || fi.Size() != 0)) || (!inMemory && fi.Size() == 0) {
				t.Errorf("database in memory: %v (%d bytes), on disk %d bytes; want in memory: %v", inMemory, size, fi.Size(), tc.inMemory)
			}
		})
	}
}
