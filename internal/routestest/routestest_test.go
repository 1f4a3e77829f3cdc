package routestest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// failures records what Agree reports instead of failing the test that runs it.
type failures struct {
	testing.TB
	errors []string
}

func (f *failures) Helper() {}

func (f *failures) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func TestAgreeReportsAMissingAndAnUnroutedHandler(t *testing.T) {
	routed, err := RoutedTo("fulfillment")
	if err != nil {
		t.Fatal(err)
	}
	if len(routed) < 2 {
		t.Fatalf("routes.yaml routes %v to fulfillment; the test needs two types", routed)
	}
	f := &failures{TB: t}
	Agree(f, "fulfillment", func(r outboxlib.Registrar) {
		for _, typ := range routed[1:] { // the first routed type has no handler
			r.Handle(typ, nil)
		}
		r.Handle("parcel.teleported", nil) // routed to nobody
	})
	if len(f.errors) != 2 ||
		!strings.Contains(f.errors[0], "routes "+routed[0]+" to fulfillment, which has no handler") ||
		!strings.Contains(f.errors[1], "fulfillment handles parcel.teleported, which relay/routes.yaml does not route") {
		t.Errorf("Agree reported %q", f.errors)
	}

	f = &failures{TB: t}
	Agree(f, "fulfillment", func(r outboxlib.Registrar) {
		for _, typ := range routed {
			r.Handle(typ, nil)
		}
	})
	if len(f.errors) != 0 {
		t.Errorf("Agree reported %q for exactly the routed types", f.errors)
	}
}

func TestAgreeReportsAConsumerWithoutRoutes(t *testing.T) {
	f := &failures{TB: t}
	Agree(f, "nobody", func(outboxlib.Registrar) {})
	if len(f.errors) != 1 || !strings.Contains(f.errors[0], "routes nothing to nobody") {
		t.Errorf("Agree reported %q", f.errors)
	}
}
