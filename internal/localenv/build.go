package localenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spanmart/spanmart/internal/topology"
)

// ModulePath is the module the local stacks build from.
const ModulePath = "github.com/spanmart/spanmart"

// RepoRoot is the directory of the spanmart module's go.mod, found from the working directory
// upwards: the stacks build their binaries from source, so they have to know where it is.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			first, _ := bufio.NewReader(f).ReadString('\n')
			f.Close()
			if strings.TrimSpace(first) == "module "+ModulePath {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the spanmart checkout (no go.mod of module " + ModulePath + " above the working directory): run from the repository")
		}
		dir = parent
	}
}

// Build compiles pkgs (paths relative to root, "./services/orders") into dir with `go build`,
// which leaves up-to-date binaries alone, so a second build with nothing changed only checks the
// build cache. The compiler's output goes to out (nil: into the error).
func Build(ctx context.Context, root, dir string, pkgs []string, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	var buf bytes.Buffer
	if out == nil {
		out = &buf
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg := fmt.Sprintf("go build %s: %v", strings.Join(pkgs, " "), err)
		if buf.Len() > 0 {
			msg += "\n" + buf.String()
		}
		return errors.New(msg)
	}
	return nil
}

// Packages are the Go packages of every deployable in the roster, in start order.
func Packages() []string {
	var out []string
	for _, s := range topology.Services() {
		out = append(out, s.Package)
	}
	return out
}
