package httpapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
)

// warehouseOnly guards the warehouse's actions (POST /v1/shipments/{id}/ship and /fail): a request
// passes with a Google ID token (Authorization: Bearer) for the service's URL whose account v
// allows: a warehouse's (WAREHOUSE_ALLOWED_EMAILS) or an operator acting for one
// (ADMIN_ALLOWED_EMAILS). v is an outboxlib.Verifier, which checks every ID token of the system the
// same way (signature by a key of the issuer, issuer, audience, lifetime, a verified e-mail on its
// list). The verified account is who acts, recorded on the shipment (actorOf): never a field the
// caller writes. Anything else is a problem and changes nothing: 401 with WWW-Authenticate for no
// valid token, 403 for an account that is not allowed, 503 while the issuer's keys cannot be had
// (outboxlib.Refusals, as the operators' guard answers).
// A nil v refuses everyone (403).
func warehouseOnly(v *outboxlib.Verifier) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if v == nil {
				platform.Logger(req.Context()).Warn("warehouse action refused: no warehouse accounts configured (WAREHOUSE_ALLOWED_EMAILS)",
					zap.String("path", c.Path()))
				return platform.NewProblem(http.StatusForbidden, "no warehouse accounts are configured for this service")
			}
			who, err := v.Verify(req.Context(), req.Header.Get(echo.HeaderAuthorization))
			if err != nil {
				return warehouseRefusals.Refuse(c, err)
			}
			c.SetRequest(req.WithContext(context.WithValue(req.Context(), actorKey{}, who)))
			return next(c)
		}
	}
}

var warehouseRefusals = outboxlib.Refusals{Log: "warehouse action refused",
	NotAllowed:      "the caller's account may not ship or fail shipments",
	Unauthenticated: "a valid Google ID token of a warehouse's account is required"}

type actorKey struct{}

// actorOf returns the verified account of a request warehouseOnly let through ("" otherwise).
func actorOf(ctx context.Context) string {
	who, _ := ctx.Value(actorKey{}).(string)
	return who
}
