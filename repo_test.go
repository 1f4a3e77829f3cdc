// Tests of the repository's own contracts: the README's two commands, CI and the Cloud Build file
// stay in step with the code.
package spanmart_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
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

type cloudBuild struct {
	Steps []struct {
		ID   string   `yaml:"id"`
		Args []string `yaml:"args"`
	} `yaml:"steps"`
	Images []string `yaml:"images"`
}

// TestCloudBuildBuildsEveryBinary checks that every image cloudbuild.yaml builds comes from a main
// package that exists, that every binary is built, pushed as an image and deployed.
func TestCloudBuildBuildsEveryBinary(t *testing.T) {
	b, err := os.ReadFile("cloudbuild.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cb cloudBuild
	if err := yaml.Unmarshal(b, &cb); err != nil {
		t.Fatalf("cloudbuild.yaml: %v", err)
	}
	var binaries []string
	for _, svc := range topology.Services() {
		binaries = append(binaries, strings.TrimPrefix(svc.Package, "./"))
	}
	var built []string
	for _, s := range cb.Steps {
		for _, a := range s.Args {
			if dir, ok := strings.CutPrefix(a, "SERVICE="); ok {
				built = append(built, dir)
				main, err := os.ReadFile(filepath.Join(dir, "main.go"))
				if err != nil || !strings.Contains(string(main), "package main") {
					t.Errorf("step %s builds %s, which is not a main package", s.ID, dir)
				}
			}
		}
	}
	slices.Sort(built)
	want := slices.Clone(binaries)
	slices.Sort(want)
	if !slices.Equal(built, want) {
		t.Errorf("cloudbuild.yaml builds %q, want %q", built, want)
	}
	for _, bin := range binaries {
		name := filepath.Base(bin)
		if !slices.ContainsFunc(cb.Images, func(img string) bool { return strings.Contains(img, "/"+name+":") }) {
			t.Errorf("image of %s is not listed in images:", name)
		}
		if !strings.Contains(string(b), "deploy "+name+" ") && !strings.Contains(string(b), "gcloud run deploy "+name+" ") {
			t.Errorf("cloudbuild.yaml does not deploy %s", name)
		}
	}
}

// TestCloudBuildQueuesMatchSubscriberQueue checks that the queue flags cloudbuild.yaml applies in
// production are relay.SubscriberQueue, the settings the dev stack and the e2e harness create.
func TestCloudBuildQueuesMatchSubscriberQueue(t *testing.T) {
	b, err := os.ReadFile("cloudbuild.yaml")
	if err != nil {
		t.Fatal(err)
	}
	q := relay.SubscriberQueue("q")
	r, l := q.GetRetryConfig(), q.GetRateLimits()
	seconds := func(d *durationpb.Duration) string {
		return strconv.FormatFloat(d.AsDuration().Seconds(), 'f', -1, 64) + "s"
	}
	want := fmt.Sprintf("--max-attempts=%d --max-retry-duration=%s --min-backoff=%s --max-backoff=%s --max-doublings=%d --max-dispatches-per-second=%s --max-concurrent-dispatches=%d",
		r.GetMaxAttempts(), seconds(r.GetMaxRetryDuration()), seconds(r.GetMinBackoff()), seconds(r.GetMaxBackoff()),
		r.GetMaxDoublings(), strconv.FormatFloat(l.GetMaxDispatchesPerSecond(), 'f', -1, 64), l.GetMaxConcurrentDispatches())
	if !strings.Contains(string(b), want) {
		t.Errorf("cloudbuild.yaml's queue flags differ from relay.SubscriberQueue; want %q", want)
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
		Sources     map[string]string            `yaml:"sources"`
		Subscribers map[string]map[string]string `yaml:"subscribers"`
		Routes      map[string][]string          `yaml:"routes"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	wantSources := map[string]string{}
	wantSubs := map[string]map[string]string{}
	for _, svc := range topology.Consumers() {
		wantSources[svc.Database] = svc.Name
		wantSubs[svc.Name] = map[string]string{
			"queue":    "${TASKS_LOCATION}/queues/" + svc.Queue,
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

// TestCloudBuildFollowsTheRoster checks the lists cloudbuild.yaml writes out in shell against
// internal/topology: the queues it creates, the relay's sources and subscriber URLs, and one
// deploy per service with its database.
func TestCloudBuildFollowsTheRoster(t *testing.T) {
	b, err := os.ReadFile("cloudbuild.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	m := regexp.MustCompile(`for q in ([^;]+); do`).FindStringSubmatch(text)
	if m == nil || !slices.Equal(strings.Fields(m[1]), topology.Queues()) {
		t.Errorf("cloudbuild.yaml creates queues %v, want the roster's %v", m, topology.Queues())
	}
	var sources []string
	for _, db := range topology.Databases() {
		sources = append(sources, "$$db/"+db)
	}
	if want := "RELAY_SOURCES=" + strings.Join(sources, ",") + ";"; !strings.Contains(text, want) {
		t.Errorf("cloudbuild.yaml does not give the relay %q", want)
	}
	for _, svc := range topology.Consumers() {
		if want := svc.URLVar + "=$$(url " + svc.Name + ")"; !strings.Contains(text, want) {
			t.Errorf("cloudbuild.yaml does not give the relay %q", want)
		}
		if !regexp.MustCompile(`(?m)^\s*deploy ` + regexp.QuoteMeta(svc.Name) + ` ` + regexp.QuoteMeta(svc.Database) + ` `).MatchString(text) {
			t.Errorf("cloudbuild.yaml does not deploy %s with database %s", svc.Name, svc.Database)
		}
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
