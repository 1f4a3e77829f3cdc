package events_test

import (
	"testing"

	"github.com/spanmart/spanmart/internal/routestest"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/events"
)

// TestRoutesAndHandlersAgree: every event type the relay routes to gateway-abstraction has a handler here, and
// every handler's type is routed to it.
func TestRoutesAndHandlersAgree(t *testing.T) {
	routestest.Agree(t, "gateway-abstraction", func(r outboxlib.Registrar) { events.Register(r, nil) })
}
