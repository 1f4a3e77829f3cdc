// Tests of the repository's own contracts: the README's two commands, CI and the routing file stay
// in step with the code (cloudbuild_test.go holds the deployment to it).
package spanmart_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/spanmart/spanmart/internal/topology"
)

// readmeCommands returns the command lines of the README's first shell block.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md has no ```sh block")
	}
	var cmds []string
	for _, l := range strings.Split(string(m[1]), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			cmds = append(cmds, l)
		}
	}
	return cmds
}

func TestReadmeOpensWithRunAndTestCommands(t *testing.T) {
	cmds := readmeCommands(t)
	want := []string{"go run ./emulator/devstack", "go test ./..."}
	if !slices.Equal(cmds, want) {
		t.Fatalf("README's first sh block = %q, want %q", cmds, want)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(ci), "\n"), want[1]) {
		t.Errorf(".ci/run does not run the README's test command %q", want[1])
	}
}

// TestRoutesFollowTheRoster checks relay/routes.yaml against internal/topology: each database maps
// to the service that owns it, and each consumer is a subscriber with its own queue, URL variable,
// audience and ledger endpoint, so that a service is added in one place and the routing file cannot
// drift from it.
func TestRoutesFollowTheRoster(t *testing.T) {
	b, err := os.ReadFile("relay/routes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Sources     map[string]string         `yaml:"sources"`
		Subscribers map[string]map[string]any `yaml:"subscribers"`
		Routes      map[string][]string       `yaml:"routes"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	wantSources := map[string]string{}
	wantSubs := map[string]map[string]any{}
	for _, svc := range topology.Consumers() {
		wantSources[svc.Database] = svc.Name
		var queues []any
		for _, q := range svc.Queues {
			queues = append(queues, "${TASKS_LOCATION}/queues/"+q)
		}
		wantSubs[svc.Name] = map[string]any{
			"queues":   queues,
			"url":      "${" + svc.URLVar + "}/events",
			"audience": "${" + svc.URLVar + "}",
			"ledger":   "${" + svc.URLVar + "}/admin/ledger",
		}
	}
	if diff := cmp.Diff(wantSources, f.Sources); diff != "" {
		t.Errorf("routes.yaml sources differ from the roster (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSubs, f.Subscribers); diff != "" {
		t.Errorf("routes.yaml subscribers differ from the roster (-want +got):\n%s", diff)
	}
	for typ, subs := range f.Routes {
		for _, sub := range subs {
			if _, ok := topology.Lookup(sub); !ok {
				t.Errorf("route %s names %s, which is not in the roster", typ, sub)
			}
		}
	}
}

// TestAPIPackagesStandAlone: a service's wire types (services/<svc>/api), and the outbox
// pipeline's (pkg/outboxlib/outboxapi), are imported by the server and by its clients
// (internal/adminclient, other services), so they import the standard library only: never the
// server's internal packages, a client, or anything that pulls either in.
func TestAPIPackagesStandAlone(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./services/.../api", "./pkg/outboxlib/outboxapi").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var apis int
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/spanmart/spanmart/services/") && strings.HasSuffix(pkg, "/api") ||
			pkg == "github.com/spanmart/spanmart/pkg/outboxlib/outboxapi" {
			apis++
			continue
		}
		t.Errorf("an api package (services/*/api, pkg/outboxlib/outboxapi) depends on %s", pkg)
	}
	if apis == 0 {
		t.Error("go list found no services/*/api package")
	}
}

// TestGoModIsTidy fails when `go mod tidy` would change go.mod or go.sum (a dependency used
// directly but marked indirect, one no longer used, a missing checksum).
func TestGoModIsTidy(t *testing.T) {
	out, err := exec.Command("go", "mod", "tidy", "-diff").CombinedOutput()
	if err != nil {
		t.Errorf("go mod tidy -diff: %v; run go mod tidy:\n%s", err, out)
	}
}

// TestCitesOnlyItsOwnDesign: docs/architecture.md is the design; nothing cites the team's design
// file outside the repository. Applied migrations are left as they are (their checksums are
// recorded in every database).
func TestCitesOnlyItsOwnDesign(t *testing.T) {
	outside := "ARCHITECTURE" + ".md"
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".") {
			return filepath.SkipDir
		}
		switch filepath.Ext(path) {
		case ".go", ".yaml", ".yml", ".md":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), outside) {
			t.Errorf("%s cites %s, which is not in the repository: cite docs/architecture.md", path, outside)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
