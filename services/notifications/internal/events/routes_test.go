package events_test

import (
	"testing"

	"github.com/spanmart/spanmart/internal/routestest"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/services/notifications/internal/events"
)

// TestRoutesAndHandlersAgree: every event type the relay routes to notifications has a handler here, and
// every handler's type is routed to it.
func TestRoutesAndHandlersAgree(t *testing.T) {
	routestest.Agree(t, "notifications", func(r outboxlib.Registrar) { events.Register(r, nil) })
}
