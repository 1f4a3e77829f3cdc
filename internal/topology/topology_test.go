package topology_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/dbschema"
)

// Every entry is complete and unique: names, packages, databases, ports, queues and variables.
func TestRosterIsConsistent(t *testing.T) {
	seen := map[string]string{}
	unique := func(kind, v, who string) {
		if v == "" {
			return
		}
		if other, ok := seen[kind+"\x00"+v]; ok {
			t.Errorf("%s %q is used by both %s and %s", kind, v, other, who)
		}
		seen[kind+"\x00"+v] = who
	}
	relays := 0
	for _, s := range topology.Services() {
		unique("name", s.Name, s.Name)
		unique("package", s.Package, s.Name)
		unique("database", s.Database, s.Name)
		for _, q := range s.Queues {
			unique("queue", q, s.Name)
		}
		unique("url variable", s.URLVar, s.Name)
		if s.DevPort <= 0 {
			t.Errorf("%s has no dev port", s.Name)
		}
		unique("port", strconv.Itoa(s.DevPort), s.Name)
		if s.Binary() != s.Name {
			t.Errorf("%s: binary %q (from %s) is not the service's name", s.Name, s.Binary(), s.Package)
		}
		if _, err := os.Stat(filepath.Join("..", "..", s.Package, "main.go")); err != nil {
			t.Errorf("%s: no main package at %s: %v", s.Name, s.Package, err)
		}
		switch s.Name {
		case topology.Relay, topology.Console:
			if s.Name == topology.Relay {
				relays++
			}
			if s.Database != "" || len(s.Queues) != 0 || s.URLVar != "" {
				t.Errorf("%s has a database, queue or URL variable: %+v", s.Name, s)
			}
		default:
			if s.Database == "" || len(s.Queues) == 0 || s.URLVar == "" {
				t.Errorf("service %s needs a database, a queue and a URL variable: %+v", s.Name, s)
			}
		}
	}
	all := topology.Services()
	if relays != 1 || all[len(all)-2].Name != topology.Relay || all[len(all)-1].Name != topology.Console {
		t.Errorf("the relay must be listed once, after its consumers, and the console last (it reads them all)")
	}
	if s, ok := topology.OwnerOf("payments"); !ok || s.Name != "gateway-abstraction" {
		t.Errorf("OwnerOf(payments) = %+v, %v", s, ok)
	}
}

// The roster's databases are exactly pkg/dbschema's, in its order: no database without an owner,
// no owner naming a database without a schema.
func TestDatabasesFollowTheSchema(t *testing.T) {
	if got, want := topology.Databases(), dbschema.Names(); !slices.Equal(got, want) {
		t.Errorf("the roster's databases %v, want pkg/dbschema's %v in its order", got, want)
	}
}
