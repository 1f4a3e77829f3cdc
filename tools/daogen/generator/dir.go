package generator

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spanmart/spanmart/pkg/migrate"
)

// FromDir reads a directory of migrations (NNNN_description.sql) as the only stream of a database
// called name: the generator's input for a schema that is not in pkg/dbschema (tests, fixtures).
// The header of the generated files names the directory relative to the module root.
func FromDir(name, dir string) (Database, error) {
	rel, err := moduleRelative(dir)
	if err != nil {
		return Database{}, err
	}
	return FromMigrations(migrate.Database{Name: name, Streams: []migrate.Stream{{Name: name, Dir: rel, FS: os.DirFS(dir)}}})
}

// moduleRelative returns dir relative to the directory of the enclosing go.mod, with slashes.
func moduleRelative(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for root := abs; ; {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			rel, err := filepath.Rel(root, abs)
			if err != nil {
				return "", err
			}
			return filepath.ToSlash(rel), nil
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("%s is not inside a Go module", dir)
		}
		root = parent
	}
}
