// Tests of the repository's own contracts: the README's two commands, CI and the Cloud Build file
// stay in step with the code.
package spanmart_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"

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
	binaries := []string{"services/orders", "services/fulfillment", "services/gateway-abstraction", "services/notifications", "relay"}
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
