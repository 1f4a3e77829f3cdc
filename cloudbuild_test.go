// Tests of the deployment against the roster (internal/topology): cloudbuild.yaml, the alert
// policies with their runbook, and the Docker Compose stack.
//
// cloudbuild.yaml is mostly shell. Rather than match its text, the tests run its steps the way
// Cloud Build would (substitutions applied, each bash step run by bash) with gcloud and docker
// replaced by a script that records its arguments, and check the commands it would run: what is
// built, pushed, migrated and deployed, with which account, environment, secrets and invoker
// bindings.

package spanmart_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
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

	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/localenv"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
)

// The project the build is run for, and the operators it is given (a user and a service account,
// which get different IAM member prefixes).
const (
	testProject       = "spanmart-prod"
	testProjectNumber = "123456789012"
	testCommit        = "0123456789abcdef0123456789abcdef01234567"
)

var testOperators = []string{"alice@example.com", "oncall@spanmart-prod.iam.gserviceaccount.com"}

type buildFile struct {
	Substitutions map[string]string `yaml:"substitutions"`
	Steps         []buildStep       `yaml:"steps"`
	Images        []string          `yaml:"images"`
}

type buildStep struct {
	ID         string   `yaml:"id"`
	Name       string   `yaml:"name"`
	Entrypoint string   `yaml:"entrypoint"`
	Args       []string `yaml:"args"`
	WaitFor    []string `yaml:"waitFor"`
}

// A command cloudbuild.yaml runs: a step's entrypoint and arguments, or a gcloud or docker
// invocation of one of its scripts.
type command struct {
	step string
	argv []string
}

// A build is cloudbuild.yaml as Cloud Build would run it for testProject.
type build struct {
	file     buildFile
	vars     map[string]string // substitutions, the built-in ones included
	images   []string          // after substitution
	commands []command
	deploys  map[string]deploy // by service name
}

// A deploy is one `gcloud run deploy`.
type deploy struct {
	flags   map[string][]string // --name=value; a flag without a value has ""
	env     map[string]string   // --set-env-vars
	secrets map[string]string   // --set-secrets
}

func (d deploy) flag(name string) string {
	if v := d.flags[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func (d deploy) has(name string) bool { _, ok := d.flags[name]; return ok }

// substitute applies Cloud Build's substitutions to s: $VAR and ${VAR} from vars, $$ to $.
func substitute(s string, vars map[string]string) (string, error) {
	var err error
	out := regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`).ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		name := strings.Trim(m, "${}")
		v, ok := vars[name]
		if !ok && err == nil {
			err = fmt.Errorf("%s is not a substitution of the file nor a built-in one", m)
		}
		return v
	})
	return out, err
}

// fakeTool records every invocation: the tool's name and its arguments, separated by \037, one
// invocation per \036. It succeeds, so `describe || create` takes the first branch.
const fakeTool = `#!/bin/sh
{ printf '%s' "${0##*/}"; for a in "$@"; do printf '\037%s' "$a"; done; printf '\036'; } >> "$SPANMART_FAKE_LOG"
`

// runBuild runs cloudbuild.yaml's steps for testProject with the operators in operators and the
// substitutions more (name, value pairs) on top of the file's.
func runBuild(t *testing.T, operators []string, more ...string) build {
	t.Helper()
	bl, err := tryBuild(t, operators, more...)
	if err != nil {
		t.Fatal(err)
	}
	return bl
}

// tryBuild is runBuild; a step that fails ends the build with its error and output.
func tryBuild(t *testing.T, operators []string, more ...string) (build, error) {
	t.Helper()
	b, err := os.ReadFile("cloudbuild.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var bl build
	if err := yaml.Unmarshal(b, &bl.file); err != nil {
		t.Fatalf("cloudbuild.yaml: %v", err)
	}
	bl.vars = map[string]string{
		"PROJECT_ID": testProject, "PROJECT_NUMBER": testProjectNumber, "COMMIT_SHA": testCommit,
		"SHORT_SHA": testCommit[:7], "BUILD_ID": "build-1", "LOCATION": "global",
	}
	for k, v := range bl.file.Substitutions {
		if !strings.HasPrefix(k, "_") {
			t.Errorf("substitution %s: user substitutions start with _", k)
		}
		bl.vars[k] = v
	}
	bl.vars["_OPERATOR_EMAILS"] = strings.Join(operators, ",")
	for i := 0; i+1 < len(more); i += 2 {
		bl.vars[more[i]] = more[i+1]
	}
	for _, img := range bl.file.Images {
		s, err := substitute(img, bl.vars)
		if err != nil {
			t.Errorf("images: %v", err)
		}
		bl.images = append(bl.images, s)
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"gcloud", "docker"} {
		if err := os.WriteFile(filepath.Join(bin, tool), []byte(fakeTool), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logFile := filepath.Join(dir, "calls")
	defaultEntrypoint := map[string]string{"gcr.io/cloud-builders/docker": "docker"}
	for _, st := range bl.file.Steps {
		args := make([]string, len(st.Args))
		for i, a := range st.Args {
			if args[i], err = substitute(a, bl.vars); err != nil {
				t.Errorf("step %s: %v", st.ID, err)
			}
		}
		entry := st.Entrypoint
		if entry == "" {
			entry = defaultEntrypoint[st.Name]
		}
		if entry == "" {
			t.Errorf("step %s: image %s has no known entrypoint", st.ID, st.Name)
			continue
		}
		// The scripts of the gcloud and docker images run here, with the fakes; the test step
		// (.ci/run on the Go image) is this very test suite and is only recorded.
		isTool := strings.Contains(st.Name, "cloud-sdk") || strings.Contains(st.Name, "cloud-builders/docker")
		if entry != "bash" || !isTool {
			bl.commands = append(bl.commands, command{st.ID, append([]string{entry}, args...)})
			continue
		}
		if err := os.WriteFile(logFile, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + dir, "SPANMART_FAKE_LOG=" + logFile}
		out, err := cmd.CombinedOutput()
		calls, rerr := os.ReadFile(logFile)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			return bl, fmt.Errorf("step %s failed: %v\n%s", st.ID, err, out)
		}
		for _, c := range strings.Split(strings.TrimSuffix(string(calls), "\036"), "\036") {
			if c != "" {
				bl.commands = append(bl.commands, command{st.ID, strings.Split(c, "\037")})
			}
		}
	}

	bl.deploys = map[string]deploy{}
	for _, c := range bl.find("gcloud", "run", "deploy") {
		pos, flags := parseFlags(c.argv[3:])
		if len(pos) != 1 {
			t.Errorf("gcloud run deploy %q: want one service name", c.argv[3:])
			continue
		}
		d := deploy{flags: flags, env: map[string]string{}, secrets: map[string]string{}}
		for _, v := range flags["set-env-vars"] {
			parseKeyValues(t, pos[0]+" --set-env-vars", v, d.env)
		}
		for _, v := range flags["set-secrets"] {
			parseKeyValues(t, pos[0]+" --set-secrets", v, d.secrets)
		}
		if _, dup := bl.deploys[pos[0]]; dup {
			t.Errorf("%s is deployed twice", pos[0])
		}
		bl.deploys[pos[0]] = d
	}
	return bl, nil
}

// find returns the commands whose argv starts with prefix.
func (bl build) find(prefix ...string) []command {
	var out []command
	for _, c := range bl.commands {
		if len(c.argv) >= len(prefix) && slices.Equal(c.argv[:len(prefix)], prefix) {
			out = append(out, c)
		}
	}
	return out
}

func (bl build) step(id string) buildStep {
	for _, s := range bl.file.Steps {
		if s.ID == id {
			return s
		}
	}
	return buildStep{}
}

// parseFlags splits gcloud arguments into positional ones and --name[=value] flags.
func parseFlags(args []string) ([]string, map[string][]string) {
	var pos []string
	flags := map[string][]string{}
	for _, a := range args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			pos = append(pos, a)
			continue
		}
		name, value, _ := strings.Cut(name, "=")
		flags[name] = append(flags[name], value)
	}
	return pos, flags
}

// parseKeyValues adds the K=V items of a gcloud list (comma-separated, or ^D^-prefixed with
// delimiter D) to into.
func parseKeyValues(t *testing.T, what, list string, into map[string]string) {
	t.Helper()
	sep := ","
	if strings.HasPrefix(list, "^") {
		end := strings.Index(list[1:], "^")
		sep, list = list[1:end+1], list[end+2:]
	}
	for _, item := range strings.Split(list, sep) {
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			t.Errorf("%s: malformed item %q", what, item)
			continue
		}
		if _, dup := into[k]; dup {
			t.Errorf("%s: %s set twice", what, k)
		}
		into[k] = v
	}
}

// Helpers naming production resources the way cloudbuild.yaml must.
func (bl build) account(name string) string {
	return name + "@" + testProject + ".iam.gserviceaccount.com"
}
func (bl build) url(name string) string {
	return "https://" + name + "-" + testProjectNumber + "." + bl.vars["_REGION"] + ".run.app"
}
func (bl build) image(name string) string {
	return bl.imageRepo(name) + ":" + testCommit
}
func (bl build) imageRepo(name string) string {
	return bl.vars["_REGION"] + "-docker.pkg.dev/" + testProject + "/" + bl.vars["_REPO"] + "/" + name
}
func (bl build) database(db string) string {
	return "projects/" + testProject + "/instances/" + bl.vars["_SPANNER_INSTANCE"] + "/databases/" + db
}

func list(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// TestCloudBuildBuildsEveryBinary: every deployable of the roster is built from its main package
// after the tests, pushed, listed in images, and nothing else is.
func TestCloudBuildBuildsEveryBinary(t *testing.T) {
	bl := runBuild(t, testOperators)
	builds := map[string]command{}
	for _, c := range bl.find("docker", "build") {
		var svc, tag string
		for i, a := range c.argv {
			if i+1 >= len(c.argv) {
				break
			}
			switch {
			case a == "--build-arg" && strings.HasPrefix(c.argv[i+1], "SERVICE="):
				svc = strings.TrimPrefix(c.argv[i+1], "SERVICE=")
			case a == "-t":
				tag = c.argv[i+1]
			}
		}
		if c.argv[len(c.argv)-1] != "." {
			t.Errorf("step %s does not build the repository (context %q)", c.step, c.argv[len(c.argv)-1])
		}
		builds[svc] = command{c.step, []string{tag}}
	}
	pushes := map[string]string{} // image repository -> step
	for _, c := range bl.find("docker", "push", "--all-tags") {
		pushes[c.argv[3]] = c.step
	}
	var built, want []string
	for dir := range builds {
		built = append(built, dir)
	}
	for _, svc := range topology.Services() {
		dir := strings.TrimPrefix(svc.Package, "./")
		want = append(want, dir)
		b, ok := builds[dir]
		if !ok {
			continue
		}
		if main, err := os.ReadFile(filepath.Join(dir, "main.go")); err != nil || !strings.Contains(string(main), "package main") {
			t.Errorf("step %s builds %s, which is not a main package", b.step, dir)
		}
		if b.argv[0] != bl.image(svc.Name) {
			t.Errorf("step %s tags %s, want %s", b.step, b.argv[0], bl.image(svc.Name))
		}
		if !slices.Contains(bl.step(b.step).WaitFor, "test") {
			t.Errorf("step %s does not wait for the tests", b.step)
		}
		pushStep, ok := pushes[bl.imageRepo(svc.Name)]
		if !ok {
			t.Errorf("the image of %s (%s) is not pushed", svc.Name, bl.imageRepo(svc.Name))
		} else if !slices.Contains(bl.step(pushStep).WaitFor, b.step) {
			t.Errorf("step %s pushes %s without waiting for its build (%s)", pushStep, svc.Name, b.step)
		}
		if !slices.Contains(bl.images, bl.image(svc.Name)) {
			t.Errorf("the image of %s (%s) is not listed in images:", svc.Name, bl.image(svc.Name))
		}
	}
	if diff := cmp.Diff(sorted(want...), sorted(built...)); diff != "" {
		t.Errorf("cloudbuild.yaml builds other packages than the roster's (-want +got):\n%s", diff)
	}
	if len(bl.images) != len(want) || len(pushes) != len(want) {
		t.Errorf("cloudbuild.yaml pushes %d and lists %d images, want the roster's %d", len(pushes), len(bl.images), len(want))
	}
}

// public are the services Cloud Run lets anyone reach: the public order API and the providers'
// webhooks (both authenticate what they accept). Everything else is private.
var public = map[string]bool{topology.Orders: true, topology.Gateway: true}

// TestCloudBuildDeploysEveryServiceAsItself: each deployable is deployed once, after the push,
// the migrations and the queues, from its image, as its own service account, public or private as
// intended.
func TestCloudBuildDeploysEveryServiceAsItself(t *testing.T) {
	bl := runBuild(t, testOperators)
	if diff := cmp.Diff(sorted(topology.Names()...), sorted(slices.Collect(maps.Keys(bl.deploys))...)); diff != "" {
		t.Errorf("cloudbuild.yaml deploys other services than the roster's (-want +got):\n%s", diff)
	}
	for _, c := range bl.find("gcloud", "run", "deploy") {
		for _, before := range []string{"push", "migrate", "queues"} {
			if !slices.Contains(bl.step(c.step).WaitFor, before) {
				t.Errorf("step %s deploys without waiting for %s", c.step, before)
			}
		}
	}
	for _, svc := range topology.Services() {
		d, ok := bl.deploys[svc.Name]
		if !ok {
			continue
		}
		checks := map[string]string{
			"image":           bl.image(svc.Name),
			"service-account": bl.account(svc.Name),
			"region":          bl.vars["_REGION"],
			"concurrency":     bl.vars["_CONCURRENCY"],
			"max-instances":   bl.vars["_MAX_INSTANCES"],
		}
		if svc.Name == topology.Gateway {
			// It gives its slot back while it waits on a provider (platform.Away): Cloud Run
			// lets it take more requests than it works on.
			checks["concurrency"] = bl.vars["_GATEWAY_CONCURRENCY"]
		}
		// The process works on as many requests at once as the service's --concurrency, except
		// the gateway: _CONCURRENCY in every one (pkg/platform/admission.go).
		if got := d.env["MAX_IN_FLIGHT"]; got != bl.vars["_CONCURRENCY"] || got == "" {
			t.Errorf("%s: MAX_IN_FLIGHT=%q, want _CONCURRENCY's %q", svc.Name, got, bl.vars["_CONCURRENCY"])
		}
		if work, requests := atoi(t, d.env["MAX_IN_FLIGHT"]), atoi(t, d.flag("concurrency")); requests < work {
			t.Errorf("%s: --concurrency=%d below MAX_IN_FLIGHT=%d: slots Cloud Run never fills", svc.Name, requests, work)
		}
		for flag, want := range checks {
			if got := d.flag(flag); got != want {
				t.Errorf("%s: --%s=%q, want %q", svc.Name, flag, got, want)
			}
		}
		if d.has("allow-unauthenticated") == d.has("no-allow-unauthenticated") {
			t.Errorf("%s: say --allow-unauthenticated or --no-allow-unauthenticated (one of them)", svc.Name)
		}
		if d.has("allow-unauthenticated") != public[svc.Name] {
			t.Errorf("%s: public = %v, want %v", svc.Name, d.has("allow-unauthenticated"), public[svc.Name])
		}
	}
	if r := bl.deploys[topology.Relay]; r.flag("min-instances") != "1" || !r.has("no-cpu-throttling") {
		t.Errorf("the relay polls continuously: want --min-instances=1 --no-cpu-throttling, got %v", r.flags)
	}
}

// localOnly are the variables the local stacks set that production leaves unset on purpose: the
// emulators, the local metadata server and issuer, the sandbox, the simulated carrier, and what
// Cloud Run sets or defaults.
var localOnly = map[string]bool{
	"PORT": true, "K_SERVICE": true, "LOG_LEVEL": true,
	"SPANNER_EMULATOR_HOST": true, "CLOUD_TASKS_EMULATOR_HOST": true, "GCE_METADATA_HOST": true,
	"SERVICE_ACCOUNT": true,                         // production: the instance's own account
	"OIDC_ISSUER":     true,                         // production: Google's, the default
	"STRIPE_API_URL":  true, "KOMOJU_API_URL": true, // production: the providers', the default
	"CARRIER_SIMULATE_AFTER": true, "CARRIER_SIMULATE_FAIL_SKUS": true,
	"PPROF_ENABLED": true, "SPANMART_FAULTS": true,
	"SMTP_TIMEOUT": true, "NOTIFICATIONS_RESUME_AFTER": true, // production: the defaults (30 s, 1 min); locally the mail server is local
}

// secretName matches variables that hold a secret: they come from Secret Manager.
var secretName = regexp.MustCompile(`(?i)(PASSWORD|SECRET|_KEY$|TOKEN|CREDENTIAL)`)

// localStack is the dev stack as internal/localenv describes it (the dev stack's addresses).
func localStack() localenv.Stack {
	return localenv.Stack{
		Instance: "projects/" + localcloud.Project + "/instances/dev", SpannerAddr: "127.0.0.1:9010",
		TasksAddr: "127.0.0.1:8123", TasksHTTP: "http://127.0.0.1:8124", PaysimURL: "http://127.0.0.1:12111", AuthURL: "http://127.0.0.1:8125",
		SMTPAddr: "127.0.0.1:1025", LogLevel: "info", CarrierAfter: "5s",
		URL: func(name string) string {
			s, _ := topology.Lookup(name)
			return "http://127.0.0.1:" + strconv.Itoa(s.DevPort)
		},
		Port: func(name string) int { s, _ := topology.Lookup(name); return s.DevPort },
	}
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// TestCloudBuildEnvironmentFollowsTheRoster: every deployable gets in production what it reads:
// each variable the local stacks give it (but the local-only ones), with the production values:
// its database, audience, the relay's account as the only sender of events, the operators and the
// console on the operator endpoints, the console as the only delegate, the relay's sources,
// subscribers and nudgers, and nothing that points at an emulator.
func TestCloudBuildEnvironmentFollowsTheRoster(t *testing.T) {
	bl := runBuild(t, testOperators)
	console, scheduler := bl.account(topology.Console), bl.account(topology.Scheduler)
	var consumerAccounts []string
	for _, c := range topology.Consumers() {
		consumerAccounts = append(consumerAccounts, bl.account(c.Name))
	}
	for _, svc := range topology.Services() {
		d, ok := bl.deploys[svc.Name]
		if !ok {
			t.Errorf("%s is not deployed", svc.Name)
			continue
		}
		local := envMap(localStack().Env(svc.Name, svc))
		for k := range local {
			_, inEnv := d.env[k]
			_, inSecrets := d.secrets[k]
			if !localOnly[k] && !inEnv && !inSecrets {
				t.Errorf("%s: the local stacks set %s, production does not", svc.Name, k)
			}
		}
		for k := range d.env {
			if localOnly[k] && k != "LOG_LEVEL" {
				t.Errorf("%s: production sets %s=%s, a local-only variable", svc.Name, k, d.env[k])
			}
		}
		want := map[string]string{
			"GOOGLE_CLOUD_PROJECT":  testProject,
			"ADMIN_DELEGATE_EMAILS": console,
		}
		wantAdmins := append([]string{console}, testOperators...)
		switch {
		case svc.Consumer():
			want["SPANNER_DATABASE"] = bl.database(svc.Database)
			want["OIDC_AUDIENCE"] = bl.url(svc.Name)
			want["OIDC_ALLOWED_EMAILS"] = bl.account(topology.Relay)
			want["RELAY_URL"] = bl.url(topology.Relay)
		case svc.Name == topology.Relay:
			var sources []string
			for _, db := range topology.Databases() {
				sources = append(sources, bl.database(db))
			}
			want["RELAY_SOURCES"] = strings.Join(sources, ",")
			want["RELAY_SERVICE_ACCOUNT"] = bl.account(topology.Relay)
			want["TASKS_LOCATION"] = "projects/" + testProject + "/locations/" + bl.vars["_TASKS_LOCATION"]
			want["OIDC_AUDIENCE"] = bl.url(topology.Relay)
			for _, c := range topology.Consumers() {
				want[c.URLVar] = bl.url(c.Name)
			}
			wantAdmins = append(wantAdmins, scheduler)
			if got := list(d.env["NUDGE_ALLOWED_EMAILS"]); !slices.Equal(got, sorted(consumerAccounts...)) {
				t.Errorf("relay: NUDGE_ALLOWED_EMAILS = %v, want the consumers' accounts %v", got, sorted(consumerAccounts...))
			}
		case svc.Name == topology.Console:
			want["OIDC_AUDIENCE"] = bl.url(topology.Console)
			want["RELAY_URL"] = bl.url(topology.Relay)
			for _, c := range topology.Consumers() {
				want[c.URLVar] = bl.url(c.Name)
			}
			if got := list(d.env["CONSOLE_ALLOWED_EMAILS"]); !slices.Equal(got, sorted(testOperators...)) {
				t.Errorf("console: CONSOLE_ALLOWED_EMAILS = %v, want the operators %v", got, sorted(testOperators...))
			}
			wantAdmins = nil // the console has no operator endpoints of its own
		}
		if svc.Name == topology.Fulfillment {
			// By default the project's warehouse@ ships (TestCloudBuildWarehouses: others).
			want["WAREHOUSE_ALLOWED_EMAILS"] = bl.account("warehouse")
		}
		for k, v := range want {
			if d.env[k] != v {
				t.Errorf("%s: %s=%q, want %q", svc.Name, k, d.env[k], v)
			}
		}
		admins := list(d.env["ADMIN_ALLOWED_EMAILS"])
		for _, a := range wantAdmins {
			if !slices.Contains(admins, a) {
				t.Errorf("%s: ADMIN_ALLOWED_EMAILS = %v lacks %s", svc.Name, admins, a)
			}
		}
	}
	// orders' reconciliation reads the gateway's GET /admin/payments as orders.
	if admins := list(bl.deploys[topology.Gateway].env["ADMIN_ALLOWED_EMAILS"]); !slices.Contains(admins, bl.account(topology.Orders)) {
		t.Errorf("gateway-abstraction: ADMIN_ALLOWED_EMAILS = %v lacks orders' account (its reconciliation)", admins)
	}
	if o := bl.deploys[topology.Orders].env; o["FULFILLMENT_URL"] != bl.url(topology.Fulfillment) || o["GATEWAY_URL"] != bl.url(topology.Gateway) {
		t.Errorf("orders: FULFILLMENT_URL=%q GATEWAY_URL=%q, want the peers' URLs", o["FULFILLMENT_URL"], o["GATEWAY_URL"])
	}
	// orders' customers are the project's Identity Platform users.
	if o := bl.deploys[topology.Orders].env; o["CUSTOMER_ISSUER"] != "https://securetoken.google.com/"+testProject || o["CUSTOMER_AUDIENCE"] != testProject ||
		o["CUSTOMER_JWKS_URL"] != "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com" {
		t.Errorf("orders: CUSTOMER_ISSUER=%q CUSTOMER_AUDIENCE=%q CUSTOMER_JWKS_URL=%q, want the project's Identity Platform", o["CUSTOMER_ISSUER"], o["CUSTOMER_AUDIENCE"], o["CUSTOMER_JWKS_URL"])
	}
}

// TestCloudBuildCallersMayInvokeWhomTheyCall: every private service lets each of its callers in
// at the Cloud Run layer (roles/run.invoker): the relay (its Cloud Tasks deliveries carry the
// relay's OIDC token, its ledger questions too) on every consumer whatever its ingress; each
// service on whatever its environment names another service's URL for (the nudge of the relay,
// orders' reads of fulfillment, the console's reads); Cloud Scheduler on its targets; the
// warehouse on fulfillment; and every operator on every private service.
func TestCloudBuildCallersMayInvokeWhomTheyCall(t *testing.T) {
	bl := runBuild(t, testOperators)
	bound := map[[2]string]bool{}
	for _, c := range bl.find("gcloud", "run", "services", "add-iam-policy-binding") {
		pos, flags := parseFlags(c.argv[4:])
		if len(pos) != 1 || len(flags["member"]) != 1 || len(flags["role"]) != 1 {
			t.Errorf("malformed binding %q", c.argv)
			continue
		}
		if flags["role"][0] != "roles/run.invoker" || !slices.Equal(flags["region"], []string{bl.vars["_REGION"]}) {
			t.Errorf("binding %q: want --role=roles/run.invoker --region=%s", c.argv, bl.vars["_REGION"])
		}
		bound[[2]string{pos[0], flags["member"][0]}] = true
	}
	need := map[[2]string]string{} // (service, member) -> why
	sa := func(name string) string { return "serviceAccount:" + bl.account(name) }
	for _, c := range topology.Consumers() {
		need[[2]string{c.Name, sa(topology.Relay)}] = "the relay's deliveries and ledger questions need it"
	}
	urls := map[string]string{}
	for _, svc := range topology.Services() {
		urls[bl.url(svc.Name)] = svc.Name
	}
	for caller, d := range bl.deploys {
		for k, v := range d.env {
			if callee, ok := urls[v]; ok && callee != caller && !public[callee] {
				need[[2]string{callee, sa(caller)}] = caller + " calls it (" + k + ")"
			}
		}
	}
	for _, j := range schedulerJobs(t, bl) {
		if !public[j.service] {
			need[[2]string{j.service, sa(topology.Scheduler)}] = "Cloud Scheduler's job " + j.name + " calls it"
		}
	}
	need[[2]string{topology.Fulfillment, sa("warehouse")}] = "the warehouse ships and fails shipments"
	for _, svc := range topology.Services() {
		if public[svc.Name] {
			continue
		}
		need[[2]string{svc.Name, "user:alice@example.com"}] = "an operator (a user) calls it"
		need[[2]string{svc.Name, "serviceAccount:oncall@spanmart-prod.iam.gserviceaccount.com"}] = "an operator (a service account) calls it"
	}
	for pair, why := range need {
		if !bound[pair] {
			t.Errorf("%s is not an invoker of %s: %s", pair[1], pair[0], why)
		}
	}
	// An empty item in _OPERATOR_EMAILS binds nobody ("user:").
	bl = runBuild(t, []string{"alice@example.com", ""})
	for _, c := range bl.find("gcloud", "run", "services", "add-iam-policy-binding") {
		_, flags := parseFlags(c.argv[4:])
		if m := flags["member"]; len(m) != 1 || strings.HasSuffix(m[0], ":") {
			t.Errorf("binding %q", c.argv)
		}
	}
}

// TestCloudBuildWarehouses: the warehouses named in _WAREHOUSE_EMAILS (a partner's service account
// and a person, blanks around them) are the ones fulfillment's warehouse's actions take
// (WAREHOUSE_ALLOWED_EMAILS), each made an invoker of fulfillment with its IAM member prefix, and of
// nothing else; the project's warehouse@ then is neither.
func TestCloudBuildWarehouses(t *testing.T) {
	const partner, person = "shipper@partner-logistics.iam.gserviceaccount.com", "dock-lead@warehouse.example"
	bl := runBuild(t, testOperators, "_WAREHOUSE_EMAILS", " "+partner+", ,"+person+" ")
	if got := list(bl.deploys[topology.Fulfillment].env["WAREHOUSE_ALLOWED_EMAILS"]); !slices.Equal(got, sorted(partner, person)) {
		t.Errorf("fulfillment: WAREHOUSE_ALLOWED_EMAILS = %v, want %v", got, sorted(partner, person))
	}
	members := map[string][]string{} // member -> services it invokes
	for _, c := range bl.find("gcloud", "run", "services", "add-iam-policy-binding") {
		pos, flags := parseFlags(c.argv[4:])
		if len(pos) == 1 && len(flags["member"]) == 1 {
			members[flags["member"][0]] = append(members[flags["member"][0]], pos[0])
		}
	}
	for _, m := range []string{"serviceAccount:" + partner, "user:" + person} {
		if got := members[m]; !slices.Equal(got, []string{topology.Fulfillment}) {
			t.Errorf("%s invokes %v, want only fulfillment", m, got)
		}
	}
	if got := members["serviceAccount:"+bl.account("warehouse")]; len(got) != 0 {
		t.Errorf("the project's warehouse@ invokes %v, want nothing: _WAREHOUSE_EMAILS names the warehouses", got)
	}
}

// TestCloudBuildConsoleBehindIAP: with _CONSOLE_IAP_AUDIENCE the console is deployed to take IAP's
// signed header only (CONSOLE_IAP_AUDIENCE and no OIDC_AUDIENCE: it refuses both at once), still
// for the operators, and IAP's service agent is its only invoker (the operators go through IAP);
// without it, nothing of IAP is deployed. An audience that is not one of IAP's stops the build
// before anything runs.
func TestCloudBuildConsoleBehindIAP(t *testing.T) {
	const aud = "/projects/" + testProjectNumber + "/global/backendServices/4242424242"
	iapAgent := "serviceAccount:service-" + testProjectNumber + "@gcp-sa-iap.iam.gserviceaccount.com"
	invokers := func(bl build, svc string) []string {
		var out []string
		for _, c := range bl.find("gcloud", "run", "services", "add-iam-policy-binding", svc) {
			_, flags := parseFlags(c.argv[5:])
			out = append(out, flags["member"]...)
		}
		slices.Sort(out)
		return out
	}

	bl := runBuild(t, testOperators, "_CONSOLE_IAP_AUDIENCE", aud)
	env := bl.deploys[topology.Console].env
	if env["CONSOLE_IAP_AUDIENCE"] != aud || env["OIDC_AUDIENCE"] != "" || env["OIDC_ISSUER"] != "" {
		t.Errorf("console behind IAP: CONSOLE_IAP_AUDIENCE=%q OIDC_AUDIENCE=%q OIDC_ISSUER=%q, want only IAP's audience %q",
			env["CONSOLE_IAP_AUDIENCE"], env["OIDC_AUDIENCE"], env["OIDC_ISSUER"], aud)
	}
	if got := list(env["CONSOLE_ALLOWED_EMAILS"]); !slices.Equal(got, sorted(testOperators...)) {
		t.Errorf("console behind IAP: CONSOLE_ALLOWED_EMAILS = %v, want the operators", got)
	}
	if got := invokers(bl, topology.Console); !slices.Equal(got, []string{iapAgent}) {
		t.Errorf("console behind IAP is invoked by %v, want only IAP's service agent", got)
	}
	if got := invokers(bl, topology.Relay); !slices.Contains(got, "user:alice@example.com") {
		t.Errorf("behind IAP the operators lost the relay: its invokers are %v", got)
	}

	bl = runBuild(t, testOperators)
	if _, set := bl.deploys[topology.Console].env["CONSOLE_IAP_AUDIENCE"]; set {
		t.Error("without _CONSOLE_IAP_AUDIENCE the console is given CONSOLE_IAP_AUDIENCE")
	}
	if got := invokers(bl, topology.Console); slices.Contains(got, iapAgent) {
		t.Errorf("without IAP, IAP's service agent invokes the console: %v", got)
	}

	for _, bad := range []string{"https://console-" + testProjectNumber + ".asia-northeast1.run.app", "projects/1/global/backendServices/2"} {
		bl, err := tryBuild(t, testOperators, "_CONSOLE_IAP_AUDIENCE", bad)
		if err == nil || !strings.Contains(err.Error(), "_CONSOLE_IAP_AUDIENCE") {
			t.Errorf("_CONSOLE_IAP_AUDIENCE=%s: err = %v, want a failure naming it", bad, err)
		}
		if len(bl.commands) != 0 {
			t.Errorf("_CONSOLE_IAP_AUDIENCE=%s: %d commands ran before the check", bad, len(bl.commands))
		}
	}
}

// TestCloudBuildRefusesToDeployWithoutOperators: the console requires an operator
// (CONSOLE_ALLOWED_EMAILS), so a build without _OPERATOR_EMAILS stops before anything else.
func TestCloudBuildRefusesToDeployWithoutOperators(t *testing.T) {
	bl, err := tryBuild(t, nil)
	if err == nil || !strings.Contains(err.Error(), "_OPERATOR_EMAILS") {
		t.Fatalf("a build without operators: err = %v, want a failure naming _OPERATOR_EMAILS", err)
	}
	if len(bl.commands) != 0 {
		t.Errorf("the operators check must be the first step; %d commands ran before it", len(bl.commands))
	}
	// Steps without waitFor wait for all before them; "-" would start one at once.
	for _, st := range bl.file.Steps {
		if slices.Contains(st.WaitFor, "-") {
			t.Errorf("step %s starts before the operators check (waitFor: -)", st.ID)
		}
	}
}

type schedulerJob struct {
	name, service, path string
	flags               map[string][]string
}

// schedulerJobs returns the Cloud Scheduler jobs cloudbuild.yaml creates or updates.
func schedulerJobs(t *testing.T, bl build) []schedulerJob {
	t.Helper()
	var jobs []schedulerJob
	urls := map[string]string{}
	for _, svc := range topology.Services() {
		urls[bl.url(svc.Name)] = svc.Name
	}
	for _, verb := range []string{"update", "create"} {
		for _, c := range bl.find("gcloud", "scheduler", "jobs", verb, "http") {
			pos, flags := parseFlags(c.argv[5:])
			j := schedulerJob{flags: flags}
			if len(pos) == 1 {
				j.name = pos[0]
			}
			if uri := flags["uri"]; len(uri) == 1 {
				if i := strings.Index(uri[0], ".run.app/"); i >= 0 {
					j.service, j.path = urls[uri[0][:i+len(".run.app")]], uri[0][i+len(".run.app"):]
				}
			}
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// operatorRoute reports whether the service's code registers path for POST behind its operators
// guard (e.POST(PathX, handler, operators)).
func operatorRoute(t *testing.T, svc topology.Service, path string) bool {
	t.Helper()
	var src bytes.Buffer
	err := filepath.WalkDir(strings.TrimPrefix(svc.Package, "./"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		src.Write(b)
		src.WriteByte('\n')
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{regexp.QuoteMeta(strconv.Quote(path))}
	for _, m := range regexp.MustCompile(`(\w+)\s*=\s*`+regexp.QuoteMeta(strconv.Quote(path))).FindAllStringSubmatch(src.String(), -1) {
		names = append(names, `(?:\w+\.)?`+m[1])
	}
	return regexp.MustCompile(`\.POST\(\s*(?:` + strings.Join(names, "|") + `)\s*,[^\n]*\boperators\b`).Match(src.Bytes())
}

// TestCloudBuildSchedulesTheSweepsAndTheAudit: Cloud Scheduler calls the jobs of topology.Jobs (the
// payment sweep, the e-mail sweep and orders' audit) on topology.JobSchedule, each an operator route that exists, with POST and an ID token of
// scheduler@ for the service's audience, an account the service admits.
func TestCloudBuildSchedulesTheSweepsAndTheAudit(t *testing.T) {
	bl := runBuild(t, testOperators)
	want, got := map[string]string{}, map[string]string{}
	for _, j := range topology.Jobs() {
		want[j.Name] = j.Service + " " + j.Path
	}
	for _, j := range schedulerJobs(t, bl) {
		got[j.name] = j.service + " " + j.path
		svc, ok := topology.Lookup(j.service)
		if !ok {
			t.Errorf("job %s calls %v, which is no service of the roster", j.name, j.flags["uri"])
			continue
		}
		if !strings.HasPrefix(j.path, "/admin/") || !operatorRoute(t, svc, j.path) {
			t.Errorf("job %s calls %s %s, which is not a POST operator route of %s", j.name, j.service, j.path, svc.Package)
		}
		d := bl.deploys[j.service]
		checks := map[string]string{
			"http-method":                "POST",
			"oidc-service-account-email": bl.account(topology.Scheduler),
			"oidc-token-audience":        d.env["OIDC_AUDIENCE"],
			"location":                   bl.vars["_REGION"],
		}
		for flag, v := range checks {
			if f := j.flags[flag]; len(f) != 1 || f[0] != v {
				t.Errorf("job %s: --%s=%v, want %q", j.name, flag, f, v)
			}
		}
		if s := j.flags["schedule"]; len(s) != 1 || s[0] != topology.JobSchedule {
			t.Errorf("job %s: --schedule=%v, want %q (topology.JobSchedule, what the local scheduler runs)", j.name, s, topology.JobSchedule)
		}
		if !slices.Contains(list(d.env["ADMIN_ALLOWED_EMAILS"]), bl.account(topology.Scheduler)) {
			t.Errorf("job %s: %s does not admit scheduler@ (ADMIN_ALLOWED_EMAILS=%s)", j.name, j.service, d.env["ADMIN_ALLOWED_EMAILS"])
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scheduler jobs (-want +got):\n%s", diff)
	}
}

// TestCloudBuildCreatesEveryQueue: one queue per consumer of the roster, created or updated with
// relay.SubscriberQueue's settings (what the dev stack and the e2e harness create).
func TestCloudBuildCreatesEveryQueue(t *testing.T) {
	bl := runBuild(t, testOperators)
	wantFlags := subscriberQueueFlags()
	var queues []string
	for _, verb := range []string{"update", "create"} {
		for _, c := range bl.find("gcloud", "tasks", "queues", verb) {
			pos, flags := parseFlags(c.argv[4:])
			if len(pos) != 1 {
				t.Errorf("malformed %q", c.argv)
				continue
			}
			queues = append(queues, pos[0])
			got := map[string]string{}
			for k, v := range flags {
				got[k] = v[len(v)-1]
			}
			want := maps.Clone(wantFlags)
			want["location"] = bl.vars["_TASKS_LOCATION"]
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("queue %s differs from relay.SubscriberQueue (-want +got):\n%s", pos[0], diff)
			}
		}
	}
	if diff := cmp.Diff(sorted(topology.Queues()...), sorted(queues...)); diff != "" {
		t.Errorf("queues (-want +got):\n%s", diff)
	}
}

// TestQueuesFitTheirConsumers: a subscriber queue dispatches no more deliveries at once than its
// consumer's instances work on at once (_MAX_INSTANCES × _CONCURRENCY), so that a backlog waits in
// the queue, not in Cloud Run's queue or the instances' lines (docs/capacity.md, "Overload").
func TestQueuesFitTheirConsumers(t *testing.T) {
	bl := runBuild(t, testOperators)
	queue, err := strconv.Atoi(subscriberQueueFlags()["max-concurrent-dispatches"])
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range topology.Consumers() {
		d := bl.deploys[svc.Name]
		instances, err1 := strconv.Atoi(d.flag("max-instances"))
		each, err2 := strconv.Atoi(d.env["MAX_IN_FLIGHT"])
		if err := errors.Join(err1, err2); err != nil {
			t.Errorf("%s: --max-instances=%q MAX_IN_FLIGHT=%q: %v", svc.Name, d.flag("max-instances"), d.env["MAX_IN_FLIGHT"], err)
			continue
		}
		if at := queue * len(svc.Queues); at > instances*each {
			t.Errorf("%s: its %d queue(s) dispatch %d at once, its instances take %d × %d = %d", svc.Name, len(svc.Queues), at, instances, each, instances*each)
		}
	}
}

// atoi is s as a number; a test error when it is not one.
func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Errorf("%q: %v", s, err)
	}
	return n
}

// subscriberQueueFlags are relay.SubscriberQueue's settings as gcloud tasks queues flags.
func subscriberQueueFlags() map[string]string {
	q := relay.SubscriberQueue("q")
	r, l := q.GetRetryConfig(), q.GetRateLimits()
	seconds := func(d *durationpb.Duration) string {
		return strconv.FormatFloat(d.AsDuration().Seconds(), 'f', -1, 64) + "s"
	}
	return map[string]string{
		"max-attempts":              strconv.Itoa(int(r.GetMaxAttempts())),
		"max-retry-duration":        seconds(r.GetMaxRetryDuration()),
		"min-backoff":               seconds(r.GetMinBackoff()),
		"max-backoff":               seconds(r.GetMaxBackoff()),
		"max-doublings":             strconv.Itoa(int(r.GetMaxDoublings())),
		"max-dispatches-per-second": strconv.FormatFloat(l.GetMaxDispatchesPerSecond(), 'f', -1, 64),
		"max-concurrent-dispatches": strconv.Itoa(int(l.GetMaxConcurrentDispatches())),
	}
}

// TestCloudBuildMigratesEveryDatabase: tools/migrate runs after the tests on the instance, with
// -create and no -databases, so it creates and migrates every database of pkg/dbschema, which are
// the roster's.
func TestCloudBuildMigratesEveryDatabase(t *testing.T) {
	bl := runBuild(t, testOperators)
	migrations := bl.find("go", "run", "./tools/migrate")
	if len(migrations) != 1 {
		t.Fatalf("cloudbuild.yaml runs tools/migrate %d times, want once", len(migrations))
	}
	m := migrations[0]
	args := strings.Join(m.argv[3:], " ")
	if want := "-instance projects/" + testProject + "/instances/" + bl.vars["_SPANNER_INSTANCE"]; !strings.Contains(args, want) {
		t.Errorf("migrate %s: want %s", args, want)
	}
	if !slices.Contains(m.argv, "-create") || strings.Contains(args, "-databases") || strings.Contains(args, "-status") {
		t.Errorf("migrate %s: want -create and every database (no -databases, no -status)", args)
	}
	if !slices.Contains(bl.step(m.step).WaitFor, "test") {
		t.Errorf("step %s migrates before the tests pass", m.step)
	}
	var dbs []string
	for _, d := range dbschema.Databases() {
		dbs = append(dbs, d.Name)
	}
	if diff := cmp.Diff(sorted(topology.Databases()...), sorted(dbs...)); diff != "" {
		t.Errorf("tools/migrate migrates pkg/dbschema's databases, not the roster's (-want +got):\n%s", diff)
	}
}

// secretValue matches what a provider key, webhook secret or private key looks like.
var secretValue = regexp.MustCompile(`sk_live_|sk_test_|rk_live_|rk_test_|whsec_|pk_live_|-----BEGIN|"private_key"`)

// TestCloudBuildHoldsNoSecret: no secret in cloudbuild.yaml; every variable that holds one (the
// local stacks' keys and webhook secrets, the SMTP password) comes from Secret Manager.
func TestCloudBuildHoldsNoSecret(t *testing.T) {
	b, err := os.ReadFile("cloudbuild.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m := secretValue.Find(b); m != nil {
		t.Errorf("cloudbuild.yaml contains %q: secrets come from Secret Manager (--set-secrets)", m)
	}
	bl := runBuild(t, testOperators)
	for name, d := range bl.deploys {
		for k, v := range d.env {
			if secretName.MatchString(k) || secretValue.MatchString(v) {
				t.Errorf("%s: %s is set inline (--set-env-vars); it must come from --set-secrets", name, k)
			}
		}
		for k, v := range d.secrets {
			if !regexp.MustCompile(`^[a-z0-9-]+:(latest|[0-9]+)$`).MatchString(v) {
				t.Errorf("%s: --set-secrets %s=%s, want SECRET:VERSION", name, k, v)
			}
		}
		svc, _ := topology.Lookup(name)
		for k := range envMap(localStack().Env(name, svc)) {
			if _, ok := d.secrets[k]; secretName.MatchString(k) && !ok {
				t.Errorf("%s: %s (a secret, set by the local stacks) does not come from --set-secrets", name, k)
			}
		}
		if _, ok := d.secrets["SMTP_PASSWORD"]; d.env["SMTP_USERNAME"] != "" && !ok {
			t.Errorf("%s: SMTP_USERNAME without SMTP_PASSWORD from --set-secrets", name)
		}
	}
}

// The alert policies: Cloud Monitoring's AlertPolicy (REST, projects.alertPolicies) in YAML, as
// `gcloud alpha monitoring policies create --policy-from-file` takes them. Only the fields the
// policies use are declared; an unknown one (a typo) fails the decoding.
type alertPolicy struct {
	DisplayName   string `yaml:"displayName"`
	Documentation struct {
		Content  string `yaml:"content"`
		MimeType string `yaml:"mimeType"`
		Subject  string `yaml:"subject"`
	} `yaml:"documentation"`
	UserLabels map[string]string `yaml:"userLabels"`
	Severity   string            `yaml:"severity"`
	Combiner   string            `yaml:"combiner"`
	Enabled    bool              `yaml:"enabled"`
	Conditions []struct {
		DisplayName string `yaml:"displayName"`
		PromQL      struct {
			Query              string            `yaml:"query"`
			Duration           string            `yaml:"duration"`
			EvaluationInterval string            `yaml:"evaluationInterval"`
			Labels             map[string]string `yaml:"labels"`
		} `yaml:"conditionPrometheusQueryLanguage"`
	} `yaml:"conditions"`
	AlertStrategy struct {
		AutoClose string `yaml:"autoClose"`
	} `yaml:"alertStrategy"`
}

// metricLabels reads the Prometheus metrics the code registers and their labels, from the
// collectors' options: Name: "x" ... }, []string{"a", "b"}. Histograms also get _bucket (with
// le), _count and _sum.
func metricLabels(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	def := regexp.MustCompile(`(?s)New(Counter|Gauge|Histogram)Vec\(prometheus\.\w+Opts\{.*?Name:\s*"(\w+)".*?\},\s*\[\]string\{([^}]*)\}\)`)
	for _, root := range []string{"pkg", "services", "relay"} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range def.FindAllStringSubmatch(string(b), -1) {
				var labels []string
				for _, l := range strings.Split(m[3], ",") {
					if l = strings.Trim(strings.TrimSpace(l), `"`); l != "" {
						labels = append(labels, l)
					}
				}
				out[m[2]] = labels
				if m[1] == "Histogram" {
					out[m[2]+"_bucket"] = append(slices.Clone(labels), "le")
					out[m[2]+"_count"], out[m[2]+"_sum"] = labels, labels
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// runbookAnchors returns the anchors GitHub gives the runbook's headings, by level.
func runbookAnchors(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile("docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	inCode := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if inCode || level == 0 || !strings.HasPrefix(line[level:], " ") {
			continue
		}
		slug := strings.ToLower(strings.TrimSpace(line[level:]))
		slug = regexp.MustCompile(`[^\p{L}\p{N} _-]`).ReplaceAllString(slug, "")
		out[strings.ReplaceAll(slug, " ", "-")] = level
	}
	return out
}

// TestAlertPoliciesFollowTheCode: every policy in monitoring/alerts/ is a well-formed AlertPolicy
// with a severity and a PromQL condition over metrics the code exports, with their labels; it
// links its own section of docs/runbook.md (named like the file), and every alert section of the
// runbook has its policy.
func TestAlertPoliciesFollowTheCode(t *testing.T) {
	files, err := filepath.Glob("monitoring/alerts/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no alert policies in monitoring/alerts/ (%v)", err)
	}
	metrics := metricLabels(t)
	anchors := runbookAnchors(t)
	severities := map[string]bool{"CRITICAL": true, "ERROR": true, "WARNING": true}
	duration := regexp.MustCompile(`^[0-9]+s$`)
	metricRef := regexp.MustCompile(`\b(?:outbox|orders|fulfillment|gateway|notifications|spanmart)_[a-z0-9_]+\b`)
	grouping := regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matchers := regexp.MustCompile(`\{([^}]*)\}`)
	matcher := regexp.MustCompile(`([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)`)
	linked := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var p alertPolicy
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&p); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if p.DisplayName == "" || !p.Enabled || len(p.Conditions) == 0 {
			t.Errorf("%s: want a displayName, enabled: true and conditions", f)
		}
		if !severities[p.Severity] || p.UserLabels["severity"] != strings.ToLower(p.Severity) {
			t.Errorf("%s: severity %q, userLabels.severity %q: want CRITICAL, ERROR or WARNING and its lower case", f, p.Severity, p.UserLabels["severity"])
		}
		if p.UserLabels["runbook"] != name {
			t.Errorf("%s: userLabels.runbook = %q, want %q", f, p.UserLabels["runbook"], name)
		}
		if len(p.Conditions) > 1 && p.Combiner != "OR" {
			t.Errorf("%s: %d conditions: want combiner OR (any of them is the problem)", f, len(p.Conditions))
		}
		if p.Documentation.MimeType != "text/markdown" || p.Documentation.Subject == "" {
			t.Errorf("%s: documentation wants mimeType text/markdown and a subject", f)
		}
		if link := "docs/runbook.md#" + name; !strings.Contains(p.Documentation.Content, link) {
			t.Errorf("%s: documentation.content does not link %s", f, link)
		} else if anchors[name] == 0 {
			t.Errorf("%s: docs/runbook.md has no section #%s", f, name)
		}
		linked[name] = true
		for _, c := range p.Conditions {
			q := c.PromQL
			if c.DisplayName == "" || q.Query == "" || !duration.MatchString(q.Duration) || !duration.MatchString(q.EvaluationInterval) {
				t.Errorf("%s: condition %q wants a displayName, a query, a duration and an evaluationInterval in seconds (\"300s\")", f, c.DisplayName)
			}
			var allowed []string
			for _, m := range metricRef.FindAllString(q.Query, -1) {
				labels, ok := metrics[m]
				if !ok {
					t.Errorf("%s: the query uses %s, which the code does not export", f, m)
				}
				allowed = append(allowed, labels...)
			}
			if len(allowed) == 0 && !strings.Contains(q.Query, "absent(") {
				t.Errorf("%s: the query %q names no metric of the code", f, q.Query)
			}
			var used []string
			for _, g := range grouping.FindAllStringSubmatch(q.Query, -1) {
				used = append(used, strings.Split(g[1], ",")...)
			}
			for _, m := range matchers.FindAllStringSubmatch(q.Query, -1) {
				for _, l := range matcher.FindAllStringSubmatch(m[1], -1) {
					used = append(used, l[1])
				}
			}
			for _, l := range used {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(allowed, l) {
					t.Errorf("%s: the query uses label %q; its metrics have %v", f, l, sorted(allowed...))
				}
			}
		}
	}
	// Every alert the runbook explains (its level-3 headings) has a policy.
	for a, level := range anchors {
		if level == 3 && !linked[a] {
			t.Errorf("docs/runbook.md explains alert #%s, which has no policy monitoring/alerts/%s.yaml", a, a)
		}
	}
}

// composeFile is the part of emulator/compose.yaml the test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		NetworkMode string            `yaml:"network_mode"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Build       struct {
			Context string            `yaml:"context"`
			Args    map[string]string `yaml:"args"`
		} `yaml:"build"`
	} `yaml:"services"`
}

// TestComposeRunsTheRoster: emulator/compose.yaml runs every deployable of the roster, built from
// its package, with the environment internal/localenv gives it on the dev stack (the compose stack
// shares the dev stack's addresses), Google's Spanner emulator, the Tasks emulator with the
// subscriber queues of relay.SubscriberQueue, the payment sandbox as the dev stack starts it and
// Mailpit's official image.
func TestComposeRunsTheRoster(t *testing.T) {
	b, err := os.ReadFile("emulator/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("emulator/compose.yaml: %v", err)
	}
	st := localStack()
	for _, svc := range topology.Services() {
		s, ok := f.Services[svc.Name]
		if !ok {
			t.Errorf("compose runs no %s", svc.Name)
			continue
		}
		if s.Build.Context != ".." || s.Build.Args["SERVICE"] != strings.TrimPrefix(svc.Package, "./") || s.NetworkMode != "host" {
			t.Errorf("compose %s: build %+v, network %q; want the repository's Dockerfile with SERVICE=%s, host network",
				svc.Name, s.Build, s.NetworkMode, strings.TrimPrefix(svc.Package, "./"))
		}
		if diff := cmp.Diff(envMap(st.Env(svc.Name, svc)), s.Environment); diff != "" {
			t.Errorf("compose %s: environment differs from internal/localenv's (-want +got):\n%s", svc.Name, diff)
		}
	}
	if img := f.Services["spanner"].Image; !strings.HasPrefix(img, "gcr.io/cloud-spanner-emulator/emulator:") {
		t.Errorf("compose spanner: image %q, want Google's gcr.io/cloud-spanner-emulator/emulator", img)
	}
	if img := f.Services["mailpit"].Image; !strings.HasPrefix(img, "axllent/mailpit:") {
		t.Errorf("compose mailpit: image %q, want axllent/mailpit", img)
	}

	tasks := f.Services["tasks"]
	if tasks.Build.Args["SERVICE"] != "emulator/tasksemu/cmd/tasksemu" {
		t.Errorf("compose tasks: build %+v, want the Tasks emulator of this repository", tasks.Build)
	}
	q := subscriberQueueFlags()
	settings := fmt.Sprintf("max_attempts=%s&max_retry_duration=%s&min_backoff=%s&max_backoff=%s&max_doublings=%s&max_dispatches_per_second=%s&max_concurrent_dispatches=%s",
		q["max-attempts"], goDuration(q["max-retry-duration"]), goDuration(q["min-backoff"]), goDuration(q["max-backoff"]),
		q["max-doublings"], q["max-dispatches-per-second"], q["max-concurrent-dispatches"])
	want := []string{"-host=127.0.0.1", "-port=" + port(st.TasksAddr), "-http-port=" + port(st.TasksHTTP), "-service-account=" + localcloud.ServiceAccount}
	for _, id := range topology.Queues() {
		want = append(want, "-queue="+localenv.Queue(id)+"?"+settings)
	}
	if diff := cmp.Diff(want, tasks.Command); diff != "" {
		t.Errorf("compose tasks: command (-want +got):\n%s", diff)
	}

	stripeHook, komojuHook := st.WebhookURLs()
	want = []string{"-host=127.0.0.1", "-port=" + port(st.PaysimURL), "-api-key=" + localenv.StripeAPIKey,
		"-webhook-url=" + stripeHook, "-webhook-secret=" + localenv.StripeWebhookSecret, "-webhook-events=" + localenv.StripeWebhookEvents,
		"-komoju-secret-key=" + localenv.KomojuSecretKey, "-komoju-webhook-url=" + komojuHook, "-komoju-webhook-secret=" + localenv.KomojuWebhookSecret}
	if pay := f.Services["paysim"]; pay.Build.Args["SERVICE"] != "emulator/paysim/cmd/paysim" || !cmp.Equal(want, pay.Command) {
		t.Errorf("compose paysim: build %+v, command %q; want the sandbox with %q", pay.Build, pay.Command, want)
	}
	want = []string{"-host=127.0.0.1", "-port=" + port(st.AuthURL), "-audience=" + localcloud.CustomerAudience}
	if auth := f.Services["auth"]; auth.Build.Args["SERVICE"] != "emulator/authemu/cmd/authemu" || !cmp.Equal(want, auth.Command) {
		t.Errorf("compose auth: build %+v, command %q; want the customers' identity provider with %q", auth.Build, auth.Command, want)
	}
}

// port returns the port of host:port or http://host:port.
func port(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

// goDuration turns gcloud's "259200s" or "0.1s" into the Go duration the Tasks emulator's -queue
// takes (72h0m0s is written 72h, as in compose.yaml).
func goDuration(s string) string {
	sec, err := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64)
	if err != nil {
		return s
	}
	switch {
	case sec >= 3600 && sec == float64(int(sec/3600))*3600:
		return strconv.Itoa(int(sec/3600)) + "h"
	case sec >= 1 && sec == float64(int(sec)):
		return strconv.Itoa(int(sec)) + "s"
	default:
		return strconv.Itoa(int(sec*1000)) + "ms"
	}
}
