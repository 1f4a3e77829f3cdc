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

// Guard is echo middleware that lets through the callers whose Google ID token Verifier accepts
// (signature by a key of the issuer, issuer, audience, lifetime, a verified e-mail on its list) and
// puts who the caller is in the request's context (CallerOf), so that what a handler records of who
// acted comes from the verified identity, never from a field the caller writes. Everyone else is
// refused as Refusals says, and changes nothing. A nil Verifier (no accounts configured) refuses
// everyone with 403. The operators' endpoints (Operators), the relay's nudge and fulfillment's
// warehouse actions are each a Guard.
type Guard struct {
	Verifier *Verifier
	Refusals Refusals
	// Identify, when set, turns the verified account into who the caller is, or refuses it with
	// an error wrapping ErrNotAllowed (Operators: a delegate acting for an operator).
	Identify func(r *http.Request, email string) (string, error)
}

// NewGuard returns the Guard of the accounts allowed, whose ID tokens issuer signs for audience;
// with none allowed it refuses everyone.
func NewGuard(issuer, audience string, allowed []string, r Refusals) (Guard, error) {
	g := Guard{Refusals: r}
	if len(allowed) == 0 {
		return g, nil
	}
	v, err := NewVerifier(VerifierConfig{Issuer: issuer, Audiences: []string{audience}, AllowedEmails: allowed})
	if err != nil {
		return g, err
	}
	g.Verifier = v
	return g, nil
}

type callerKey struct{}

// Middleware is the guard as echo middleware.
func (g Guard) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		req := ec.Request()
		if g.Verifier == nil {
			platform.Logger(req.Context()).Warn(g.Refusals.Log+": no accounts configured ("+g.Refusals.Env+")",
				zap.String("path", ec.Path()))
			return platform.NewProblem(http.StatusForbidden, g.Refusals.Unconfigured)
		}
		who, err := g.Verifier.Verify(req.Context(), req.Header.Get(echo.HeaderAuthorization))
		if err == nil && g.Identify != nil {
			who, err = g.Identify(req, who)
		}
		if err != nil {
			return g.Refusals.Refuse(ec, err)
		}
		ec.SetRequest(req.WithContext(context.WithValue(req.Context(), callerKey{}, who)))
		return next(ec)
	}
}

// CallerOf returns who the caller of the request ctx serves is, as a Guard let it through ("" for
// a request no Guard let through).
func CallerOf(ctx context.Context) string {
	who, _ := ctx.Value(callerKey{}).(string)
	return who
}

// Operators guards the operator endpoints of a service or of the relay (dead letters, replays,
// sweeps, audits): a Guard of the accounts allowed (ADMIN_ALLOWED_EMAILS). A delegate
// (ADMIN_DELEGATE_EMAILS: the console, which verified its own user) may name the operator it acts
// for in X-Spanmart-On-Behalf-Of; the operator recorded is then "operator via delegate". Anything
// else gets 401 (no valid token) or 403 (an account that is not allowed, or a header from a caller
// that is no delegate), problem+json, and changes nothing. A nil *Operators refuses everyone (403):
// no accounts are configured.
type Operators struct {
	guard     Guard
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
	g, err := NewGuard(issuer, audience, allowed, operatorRefusals)
	if err != nil {
		return nil, fmt.Errorf("outboxlib: operators: %w", err)
	}
	o := &Operators{delegates: delegates}
	g.Identify = o.identify
	o.guard = g
	return o, nil
}

// Middleware is echo middleware that lets through the operators only, and puts who the operator is
// in the request's context (OperatorOf).
func (o *Operators) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	if o == nil {
		return Guard{Refusals: operatorRefusals}.Middleware(next)
	}
	return o.guard.Middleware(next)
}

var operatorRefusals = Refusals{Log: "operator endpoint refused", NotAllowed: "the caller is not an operator of this service",
	Unauthenticated: "a valid ID token of an operator is required",
	Unconfigured:    "no operator accounts are configured for this service", Env: "ADMIN_ALLOWED_EMAILS"}

// identify returns who the operator of r is, its token's account being email: the account, or
// "operator via delegate".
func (o *Operators) identify(r *http.Request, email string) (string, error) {
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
func OperatorOf(ctx context.Context) string { return CallerOf(ctx) }

// Refusals is how a Guard answers a caller it does not let through, in the words of the callers it
// admits.
type Refusals struct {
	Log             string // the start of the WARN line, e.g. "operator endpoint refused"
	NotAllowed      string // the 403's detail: a valid token of an account not allowed
	Unauthenticated string // the 401's detail: no valid token
	Unconfigured    string // the 403's detail when no account is allowed at all
	Env             string // the variable that allows accounts, named in the log when none is
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
