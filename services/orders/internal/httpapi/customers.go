package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
)

// Customers authenticates the callers of the order routes: a customer signs in with Identity
// Platform (Firebase Auth) in production, whose client SDK hands the app an ID token, sent as
// "Authorization: Bearer <token>". The token is verified by platform.IDTokenVerifier (the one
// verifier of the repository, configured with CUSTOMER_ISSUER and CUSTOMER_AUDIENCE); its subject,
// the user's uid, is the customer: the customer_id of every order the customer places, and the
// only customer whose orders the customer may read or cancel.
type Customers struct {
	verifier *platform.IDTokenVerifier
}

// NewCustomers returns the guard of the order routes.
func NewCustomers(verifier *platform.IDTokenVerifier) *Customers {
	return &Customers{verifier: verifier}
}

type customerKey struct{}

// Challenges of WWW-Authenticate (RFC 6750 §3): a request without a token gets the scheme alone
// (§3.1: no error code when the client sent no credentials); a bad token gets invalid_token.
const (
	challengeNoToken  = `Bearer realm="orders"`
	challengeBadToken = `Bearer realm="orders", error="invalid_token"`
)

// Middleware is echo middleware that lets through requests with a valid customer ID token and puts
// the customer in the request's context (CustomerOf). Anything else is a 401 problem (a token that
// is missing, malformed, forged, expired, for another audience or from another issuer) logged at
// WARN with the reason, never the token; or a 503 when the issuer's keys cannot be fetched. The
// request goes no further: nothing is read from its body, nothing stored.
func (c *Customers) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		req := ec.Request()
		header := req.Header.Get(echo.HeaderAuthorization)
		tok, err := c.verifier.Verify(req.Context(), header)
		switch {
		case errors.Is(err, platform.ErrUnauthenticated):
			challenge := challengeBadToken
			if header == "" {
				challenge = challengeNoToken
			}
			ec.Response().Header().Set(echo.HeaderWWWAuthenticate, challenge)
			platform.Logger(req.Context()).Warn("order API refused: no valid customer token",
				zap.String("path", ec.Path()), zap.String("reason", err.Error()))
			return platform.NewProblem(http.StatusUnauthorized, "a valid ID token of a signed-in customer is required (Authorization: Bearer)")
		case err != nil:
			return platform.NewProblem(http.StatusServiceUnavailable, "the identity provider's keys are unavailable").Wrap(err)
		}
		ec.SetRequest(req.WithContext(context.WithValue(req.Context(), customerKey{}, tok.Subject)))
		return next(ec)
	}
}

// CustomerOf returns the signed-in customer of the request ctx serves ("" outside the Customers
// middleware).
func CustomerOf(ctx context.Context) string {
	who, _ := ctx.Value(customerKey{}).(string)
	return who
}
