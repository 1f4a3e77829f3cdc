// Package routestest checks a consumer's handlers against the relay's routing file,
// relay/routes.yaml: every event type the relay sends the consumer has a handler, and every
// handler's type is routed to it. Without the check a route without a handler shows only as a
// dead letter (reason unknown_type) once such an event is published, and a handler without a
// route is code that never runs.
//
//	func TestRoutesAndHandlersAgree(t *testing.T) {
//		routestest.Agree(t, "fulfillment", func(r outboxlib.Registrar) { events.Register(r, nil) })
//	}
package routestest

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// Agree fails t unless the event types relay/routes.yaml routes to consumer are exactly those
// register registers (register is called with a recorder; the handlers are not run, so the
// service they would apply events through may be nil).
func Agree(t testing.TB, consumer string, register func(outboxlib.Registrar)) {
	t.Helper()
	routed, err := RoutedTo(consumer)
	if err != nil {
		t.Fatal(err)
	}
	rec := recorder{}
	register(rec)
	handled := rec.types()
	for _, typ := range routed {
		if !slices.Contains(handled, typ) {
			t.Errorf("relay/routes.yaml routes %s to %s, which has no handler for it (each such event would be dead-lettered, reason unknown_type)", typ, consumer)
		}
	}
	for _, typ := range handled {
		if !slices.Contains(routed, typ) {
			t.Errorf("%s handles %s, which relay/routes.yaml does not route to it (the handler never runs)", consumer, typ)
		}
	}
	if len(routed) == 0 {
		t.Errorf("relay/routes.yaml routes nothing to %s", consumer)
	}
}

// RoutedTo returns the event types relay/routes.yaml routes to consumer, sorted.
func RoutedTo(consumer string) ([]string, error) {
	b, err := os.ReadFile(routesFile())
	if err != nil {
		return nil, err
	}
	var f struct {
		Routes map[string][]string `yaml:"routes"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	var types []string
	for typ, subs := range f.Routes {
		if slices.Contains(subs, consumer) {
			types = append(types, typ)
		}
	}
	sort.Strings(types)
	return types, nil
}

// routesFile is relay/routes.yaml in the source tree this package was built from.
func routesFile() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "relay", "routes.yaml")
}

// recorder records the event types handlers are registered for.
type recorder map[string]bool

func (r recorder) Handle(eventType string, _ outboxlib.HandlerFunc, _ ...outboxlib.HandlerOption) {
	r[eventType] = true
}

func (r recorder) types() []string {
	var types []string
	for typ := range r {
		types = append(types, typ)
	}
	sort.Strings(types)
	return types
}
