package httpapi

import (
	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// warehouseOnly guards the warehouse's actions (POST /v1/shipments/{id}/ship and /fail): an
// outboxlib.Guard of v, which allows the warehouses' accounts (WAREHOUSE_ALLOWED_EMAILS) and the
// operators acting for one (ADMIN_ALLOWED_EMAILS). The verified account is who acts, recorded on
// the shipment (outboxlib.CallerOf): never a field the caller writes. Anything else is a problem
// and changes nothing: 401 with WWW-Authenticate for no valid token, 403 for an account that is
// not allowed, 503 while the issuer's keys cannot be had. A nil v refuses everyone (403).
func warehouseOnly(v *outboxlib.Verifier) echo.MiddlewareFunc {
	return outboxlib.Guard{Verifier: v, Refusals: warehouseRefusals}.Middleware
}

var warehouseRefusals = outboxlib.Refusals{Log: "warehouse action refused",
	NotAllowed:      "the caller's account may not ship or fail shipments",
	Unauthenticated: "a valid Google ID token of a warehouse's account is required",
	Unconfigured:    "no warehouse accounts are configured for this service", Env: "WAREHOUSE_ALLOWED_EMAILS"}
