package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spanmart/spanmart/internal/localenv"
	"github.com/spanmart/spanmart/internal/topology"
)

// Binaries are the programs the harness runs as processes, by process kind (the emulators run in
// the harness's own process).
var Binaries = func() map[string]string {
	m := map[string]string{}
	for _, s := range topology.Services() {
		m[s.Name] = s.Package
	}
	return m
}()

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	buildTime time.Duration
)

// Build compiles every binary once per process (later calls return the first result) into a
// directory under the user cache: `go build` leaves an up-to-date binary alone, so a second test run
// with nothing changed only checks the build cache.
func Build() (dir string, took time.Duration, err error) {
	buildOnce.Do(func() {
		start := time.Now()
		buildDir, buildErr = build()
		buildTime = time.Since(start)
	})
	return buildDir, buildTime, buildErr
}

func build() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	// One directory per checkout, so two clones never overwrite each other's binaries.
	dir := filepath.Join(cache, "spanmart-e2e", fmt.Sprintf("%x", hash(root)), "bin")
	return dir, localenv.Build(context.Background(), root, dir, localenv.Packages(), nil)
}

// RepoRoot is the root of the spanmart checkout (localenv.RepoRoot).
func RepoRoot() (string, error) { return localenv.RepoRoot() }

func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
