package dbschema

import (
	"slices"
	"testing"

	"github.com/spanmart/spanmart/internal/topology"
)

// Every database of the roster has its stream, and no stream belongs to a database outside it.
func TestStreamsFollowTheRoster(t *testing.T) {
	var got []string
	for _, d := range Databases() {
		got = append(got, d.Name)
		if len(d.Streams) != 2 || d.Streams[0].Name != Outbox.Name {
			t.Errorf("database %s: streams %v, want the outbox stream then its own", d.Name, d.Streams)
		}
	}
	if !slices.Equal(got, topology.Databases()) {
		t.Errorf("databases %v, want the roster's %v", got, topology.Databases())
	}
	for db := range own {
		if _, ok := topology.OwnerOf(db); !ok {
			t.Errorf("stream for database %s, which no service of the roster owns", db)
		}
	}
	if _, err := Lookup("nosuch"); err == nil {
		t.Error("Lookup of an unknown database succeeded")
	}
}
