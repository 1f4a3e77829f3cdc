package outboxlib

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
)

// HeaderOnBehalfOf names the operator a delegate (the console) acts for: honoured only when the
// verified caller is one of Operators' delegates.
const HeaderOnBehalfOf = "X-Spanmart-On-Behalf-Of"

// Operators guards the operator endpoints of a service or of the relay (dead letters, replays,
// sweeps, audits): a request passes with a Google ID token for the service's URL whose account is
// allowed (ADMIN_ALLOWED_EMAILS). A delegate (ADMIN_DELEGATE_EMAILS: the console, which verified
// its own user) may name the operator it acts for in X-Spanmart-On-Behalf-Of; the operator recorded
// is then "operator via delegate". Anything else gets 401 (no valid token) or 403 (an account that
// is not allowed, or a header from a caller that is no delegate), problem+json, and changes nothing.
// A nil *Operators refuses everyone (403): no accounts are configured.
type Operators struct {
	verifier  *Verifier
	delegates []string
}

// NewOperators returns the guard, or nil (everyone refused) when allowed is empty. Delegates must
// be allowed themselves.
func NewOperators(issuer, audience string, allowed, delegates []string) (*Operators, error) {
	if len(allowed) == 0 {
		return nil, nil
	}
	for _, d := range delegates {
		if !slices.Contains(allowed, d) {
			return nil, fmt.Errorf("outboxlib: operators: delegate %s is not an allowed account", d)
		}
	}
	v, err := NewVerifier(VerifierConfig{Issuer: issuer, Audiences: []string{audience}, AllowedEmails: allowed})
	if err != nil {
		return nil, fmt.Errorf("outboxlib: operators: %w", err)
	}
	return &Operators{verifier: v, delegates: delegates}, nil
}

type operatorKey struct{}

// Middleware is echo middleware that lets through the operators only, and puts who the operator is
// in the request's context (OperatorOf).
func (o *Operators) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		who, err := o.verify(ec.Request())
		switch {
		case errors.Is(err, errNoOperators):
			platform.Logger(ec.Request().Context()).Warn("operator endpoint refused: no operator accounts configured (ADMIN_ALLOWED_EMAILS)",
				zap.String("path", ec.Path()))
			return platform.NewProblem(http.StatusForbidden, "no operator accounts are configured for this service")
		case err != nil:
			return operatorRefusals.Refuse(ec, err)
		}
		req := ec.Request()
		ec.SetRequest(req.WithContext(context.WithValue(req.Context(), operatorKey{}, who)))
		return next(ec)
	}
}

var errNoOperators = errors.New("no operator accounts configured")

var operatorRefusals = Refusals{Log: "operator endpoint refused", NotAllowed: "the caller is not an operator of this service",
	Unauthenticated: "a valid ID token of an operator is required"}

// verify returns who the operator of r is: the token's account, or "operator via delegate".
func (o *Operators) verify(r *http.Request) (string, error) {
	if o == nil {
		return "", errNoOperators
	}
	email, err := o.verifier.Verify(r.Context(), r.Header.Get(echo.HeaderAuthorization))
	if err != nil {
		return "", err
	}
	onBehalf := strings.TrimSpace(r.Header.Get(HeaderOnBehalfOf))
	if onBehalf == "" {
		return email, nil
	}
	if !slices.Contains(o.delegates, email) {
		return "", fmt.Errorf("%w: %s may not act on behalf of another account", ErrNotAllowed, email)
	}
	if a, err := mail.ParseAddress(onBehalf); err != nil || a.Address != onBehalf {
		return "", fmt.Errorf("%w: %s is not one e-mail address", ErrNotAllowed, HeaderOnBehalfOf)
	}
	return onBehalf + " via " + email, nil
}

// OperatorOf returns who the operator of the request ctx serves is ("" outside an Operators
// middleware): the verified account, or "operator via delegate".
func OperatorOf(ctx context.Context) string {
	who, _ := ctx.Value(operatorKey{}).(string)
	return who
}

// Refusals is how a guard built on a Verifier answers a caller it does not let through, in the
// words of the callers it admits (Operators' middleware, fulfillment's warehouse guard).
type Refusals struct {
	Log             string // the start of the WARN line, e.g. "operator endpoint refused"
	NotAllowed      string // the 403's detail: a valid token of an account not allowed
	Unauthenticated string // the 401's detail: no valid token
}

// Refuse answers err, an error of Verifier.Verify or of a guard's own check: 403 for an account
// not allowed (ErrNotAllowed), 401 with WWW-Authenticate for no valid token (ErrUnauthenticated),
// 503 while the issuer's keys cannot be had (anything else). Each refusal is logged with its
// reason; a problem, never a 500.
func (r Refusals) Refuse(ec echo.Context, err error) error {
	log := platform.Logger(ec.Request().Context()).With(zap.String("path", ec.Path()))
	switch {
	case errors.Is(err, ErrNotAllowed):
		log.Warn(r.Log+": account not allowed", zap.String("reason", err.Error()))
		return platform.NewProblem(http.StatusForbidden, r.NotAllowed)
	case errors.Is(err, ErrUnauthenticated):
		log.Warn(r.Log+": bad token", zap.String("reason", err.Error()))
		ec.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer error="invalid_token"`)
		return platform.NewProblem(http.StatusUnauthorized, r.Unauthenticated)
	default:
		return platform.NewProblem(http.StatusServiceUnavailable, "token keys unavailable").Wrap(err)
	}
}
