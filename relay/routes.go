package main

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
	"github.com/spanmart/spanmart/pkg/platform"
)

// defaultRoutes is the routing used when RELAY_ROUTES is unset.
//
//go:embed routes.yaml
var defaultRoutes []byte

// routesFile is the YAML routing file (routes.yaml documents it).
type routesFile struct {
	Sources     map[string]string         `yaml:"sources"`
	Subscribers map[string]subscriberFile `yaml:"subscribers"`
	Routes      map[string][]string       `yaml:"routes"`
	Extra       map[string]any            `yaml:",inline"`
}

type subscriberFile struct {
	Queues   []string `yaml:"queues"`
	URL      string   `yaml:"url"`
	Audience string   `yaml:"audience"`
	Ledger   string   `yaml:"ledger"`
}

// routing is a routes file with the environment applied.
type routing struct {
	Services map[string]string // database id → service name
	Routes   relay.Routes
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// loadRouting reads the routes file RELAY_ROUTES names (the embedded routes.yaml when unset),
// expands ${VAR} in the subscribers and records every problem in env: missing variables as
// missing, everything else as an invalid RELAY_ROUTES.
func loadRouting(env *platform.Env) routing {
	path := env.Lookup("RELAY_ROUTES")
	data, name := defaultRoutes, "embedded routes.yaml"
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			env.Invalid("RELAY_ROUTES", path, err)
			return routing{}
		}
		name = path
	}
	var f routesFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		env.Invalid("RELAY_ROUTES", name, err)
		return routing{}
	}
	var problems []string
	if len(f.Extra) > 0 {
		problems = append(problems, fmt.Sprintf("unknown sections %v", sortedKeys(f.Extra)))
	}
	missing := map[string]bool{}
	expand := func(s string) string {
		return envRef.ReplaceAllStringFunc(s, func(ref string) string {
			v := env.Lookup(ref[2 : len(ref)-1])
			if v == "" {
				missing[ref[2:len(ref)-1]] = true
			}
			return v
		})
	}
	subs := map[string]relay.Subscriber{}
	for _, subName := range sortedKeys(f.Subscribers) {
		sf := f.Subscribers[subName]
		sub := relay.Subscriber{Name: subName, URL: expand(sf.URL), Audience: expand(sf.Audience), LedgerURL: expand(sf.Ledger)}
		for _, q := range sf.Queues {
			sub.Queues = append(sub.Queues, expand(q))
		}
		if len(sf.Queues) == 0 || slices.Contains(sf.Queues, "") || sf.URL == "" {
			problems = append(problems, fmt.Sprintf("subscriber %s needs a queue and a url", subName))
		}
		if q, ok := duplicate(sf.Queues); ok {
			problems = append(problems, fmt.Sprintf("subscriber %s lists queue %s twice", subName, q))
		}
		subs[subName] = sub
	}
	r := routing{Services: f.Sources, Routes: relay.Routes{}}
	for _, typ := range sortedKeys(f.Routes) {
		for _, subName := range f.Routes[typ] {
			sub, ok := subs[subName]
			if !ok {
				problems = append(problems, fmt.Sprintf("route %s: unknown subscriber %s", typ, subName))
				continue
			}
			r.Routes[typ] = append(r.Routes[typ], sub)
		}
	}
	for _, db := range sortedKeys(f.Sources) {
		if f.Sources[db] == "" {
			problems = append(problems, fmt.Sprintf("source %s has no service name", db))
		}
	}
	for _, v := range sortedKeys(missing) {
		env.Missing(v)
	}
	if len(problems) > 0 {
		env.Invalid("RELAY_ROUTES", name, errors.New(strings.Join(problems, "; ")))
	}
	return r
}

// duplicate returns a value that list holds twice.
func duplicate(list []string) (string, bool) {
	seen := map[string]bool{}
	for _, v := range list {
		if seen[v] {
			return v, true
		}
		seen[v] = true
	}
	return "", false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
