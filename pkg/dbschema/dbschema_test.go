package dbschema

import "testing"

// Every database is the outbox stream followed by its own, and Lookup knows each of them only.
// (That every database has an owner in the roster, and every owner's database is here, is
// internal/topology's test.)
func TestDatabases(t *testing.T) {
	for _, d := range Databases() {
		if len(d.Streams) != 2 || d.Streams[0].Name != Outbox.Name || d.Streams[1].Name != d.Name {
			t.Errorf("database %s: streams %v, want the outbox stream then its own", d.Name, d.Streams)
		}
		if got, err := Lookup(d.Name); err != nil || got.Name != d.Name {
			t.Errorf("Lookup(%q) = %v, %v", d.Name, got.Name, err)
		}
	}
	if _, err := Lookup("nosuch"); err == nil {
		t.Error("Lookup of an unknown database succeeded")
	}
}
