// Package auth is how the console knows who its user is: a Google ID token of an operator,
// verified for the issuer, the console's own URL as audience and an allow list of accounts
// (outboxlib.Verifier, the code every service verifies its callers with), presented either as
// Authorization: Bearer or in the session cookie that GET /login?token=... sets. The verified
// e-mail is what the console names in X-Spanmart-On-Behalf-Of when it calls a service.
//
// A session is the ID token itself: the console keeps no state, so any instance accepts any
// session, and a session ends when its token expires (an hour for Google's). Forms that change
// something (a replay) carry a CSRF token bound to the session: an HMAC keyed with the session's
// token, which a page of another origin can neither read nor compute (the cookie is HttpOnly and
// SameSite=Strict as well). A bearer token is a session too and needs the same: behind a proxy
// that adds the header to every request (gcloud run services proxy), the browser sends it
// without the page asking, exactly as it sends a cookie.
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
)

// CookieName is the session cookie: the operator's ID token.
const CookieName = "console_session"

// FieldCSRF is the form field that carries the CSRF token.
const FieldCSRF = "csrf"

// Config configures New.
type Config struct {
	Issuer   string   // OIDC_ISSUER: https://accounts.google.com in production
	Audience string   // OIDC_AUDIENCE: the console's own URL
	Allowed  []string // CONSOLE_ALLOWED_EMAILS: the operators
	// HTTPClient fetches the issuer's keys; nil means the verifier's default.
	HTTPClient *http.Client
}

// Authenticator verifies the console's users. Safe for concurrent use.
type Authenticator struct {
	verifier *outboxlib.Verifier
	audience string
	// secure marks the cookie Secure: the console is served over https (its URL, the audience,
	// says so; Cloud Run terminates TLS in front of it, so the request itself looks like http).
	secure bool
}

// New returns an authenticator for cfg.
func New(cfg Config) (*Authenticator, error) {
	if cfg.Audience == "" {
		return nil, errors.New("console auth: the audience (the console's URL) is required")
	}
	v, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{
		Issuer: cfg.Issuer, Audiences: []string{cfg.Audience}, AllowedEmails: cfg.Allowed, HTTPClient: cfg.HTTPClient,
	})
	if err != nil {
		return nil, fmt.Errorf("console auth: %w", err)
	}
	u, err := url.Parse(cfg.Audience)
	if err != nil {
		return nil, fmt.Errorf("console auth: audience %q: %w", cfg.Audience, err)
	}
	return &Authenticator{verifier: v, audience: cfg.Audience, secure: u.Scheme == "https"}, nil
}

// Audience is the audience the users' tokens must carry: the console's URL.
func (a *Authenticator) Audience() string { return a.audience }

// Identity is the verified user of a request.
type Identity struct {
	Email string
	// CSRF is the token the session's forms must carry.
	CSRF string
}

type identityKey struct{}

// IdentityOf returns the user of the request ctx serves (the zero Identity outside Guard).
func IdentityOf(ctx context.Context) Identity {
	id, _ := ctx.Value(identityKey{}).(Identity)
	return id
}

// WithIdentity returns ctx carrying id, as Guard leaves it (for tests of handlers behind it).
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// Refusal is why a request was not let through.
type Refusal struct {
	Status int    // 401, 403 or 503
	Detail string // safe to show the user
}

// RefuseFunc answers a refused request: an HTML page for a page, problem+json for the API.
type RefuseFunc func(c echo.Context, r Refusal) error

// ProblemRefusal answers with problem+json (the API's answer).
func ProblemRefusal(c echo.Context, r Refusal) error {
	if r.Status == http.StatusUnauthorized {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer error="invalid_token"`)
	}
	return platform.NewProblem(r.Status, r.Detail)
}

// Guard is echo middleware that lets through the requests of an allowed user only, with its
// Identity in the context; refuse answers the others. A POST must also carry the session's CSRF
// token (403 otherwise), so that another site cannot make a signed-in operator's browser replay
// an event.
func (a *Authenticator) Guard(refuse RefuseFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			id, ref := a.identify(req)
			if ref != nil {
				return refuse(c, *ref)
			}
			if req.Method != http.MethodGet && req.Method != http.MethodHead &&
				!hmac.Equal([]byte(c.FormValue(FieldCSRF)), []byte(id.CSRF)) {
				platform.Logger(req.Context()).Warn("console request refused: CSRF token missing or wrong", zap.String("path", c.Path()))
				return refuse(c, Refusal{Status: http.StatusForbidden, Detail: "the form's CSRF token is missing or does not belong to this session: reload the page and try again"})
			}
			c.SetRequest(req.WithContext(WithIdentity(req.Context(), id)))
			return next(c)
		}
	}
}

// identify verifies the bearer header, else the session cookie.
func (a *Authenticator) identify(req *http.Request) (Identity, *Refusal) {
	header := req.Header.Get(echo.HeaderAuthorization)
	if header == "" {
		ck, err := req.Cookie(CookieName)
		if err != nil || ck.Value == "" {
			return Identity{}, &Refusal{Status: http.StatusUnauthorized, Detail: "sign in: no ID token (Authorization: Bearer) and no session"}
		}
		header = "Bearer " + ck.Value
	}
	email, ref := a.verify(req.Context(), header)
	if ref != nil {
		return Identity{}, ref
	}
	_, tok, _ := strings.Cut(strings.TrimSpace(header), " ")
	return Identity{Email: email, CSRF: csrfToken(strings.TrimSpace(tok))}, nil
}

// verify maps the verifier's answer to an e-mail or a refusal.
func (a *Authenticator) verify(ctx context.Context, header string) (string, *Refusal) {
	email, err := a.verifier.Verify(ctx, header)
	log := platform.Logger(ctx)
	switch {
	case errors.Is(err, outboxlib.ErrNotAllowed):
		log.Warn("console request refused: not an operator", zap.String("reason", err.Error()))
		return "", &Refusal{Status: http.StatusForbidden, Detail: "this account is not an operator of the console (CONSOLE_ALLOWED_EMAILS)"}
	case errors.Is(err, outboxlib.ErrUnauthenticated):
		log.Warn("console request refused: bad token", zap.String("reason", err.Error()))
		return "", &Refusal{Status: http.StatusUnauthorized, Detail: "sign in again: the ID token is not valid for this console (expired, another audience or issuer)"}
	case err != nil:
		log.Warn("console request refused: cannot verify tokens", zap.Error(err))
		return "", &Refusal{Status: http.StatusServiceUnavailable, Detail: "the identity provider's keys are unavailable; try again shortly"}
	}
	return email, nil
}

// csrfToken is the CSRF token of the session whose ID token is token: HMAC-SHA256 keyed with
// the token. Only a holder of the HttpOnly cookie can compute it, every console instance computes
// the same one, and it changes with every sign-in.
func csrfToken(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("spanmart console csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ParamToken is the parameter of /login that carries the ID token.
const ParamToken = "token"

type loginTokenKey struct{}

// HideLoginToken is echo Pre middleware (it runs before the access log sees the request): it takes
// the ID token out of /login's query string into the request's context, so that the token, a
// credential for an hour, is never written to a log line.
func HideLoginToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.URL.Path != PathLogin || !req.URL.Query().Has(ParamToken) {
			return next(c)
		}
		q := req.URL.Query()
		tok := q.Get(ParamToken)
		q.Del(ParamToken)
		u := *req.URL
		u.RawQuery = q.Encode()
		r := req.WithContext(context.WithValue(req.Context(), loginTokenKey{}, tok))
		r.URL = &u
		r.RequestURI = u.RequestURI()
		c.SetRequest(r)
		return next(c)
	}
}

// Paths of the sign-in.
const (
	PathLogin  = "/login"  // GET ?token= (or POST, form field token): sign in, then go to /
	PathLogout = "/logout" // POST (with the CSRF token): sign out
)

// Login signs the user in with the ID token of GET /login?token=... (taken aside by
// HideLoginToken) or of a POSTed form field token: verified like any request, it becomes the
// session cookie, and the browser is sent to /. A token that does not verify is refused and sets
// nothing. Changing the session is all it does: no service is called.
func (a *Authenticator) Login(refuse RefuseFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		tok, _ := req.Context().Value(loginTokenKey{}).(string)
		if req.Method == http.MethodPost {
			tok = c.FormValue(ParamToken)
		}
		tok = strings.TrimSpace(tok)
		if tok == "" {
			return refuse(c, Refusal{Status: http.StatusUnauthorized, Detail: "sign in: /login needs an ID token (?token=...)"})
		}
		email, ref := a.verify(req.Context(), "Bearer "+tok)
		if ref != nil {
			return refuse(c, *ref)
		}
		ck := a.cookie(tok)
		if exp, err := expiry(tok); err == nil {
			ck.Expires = exp
		}
		c.SetCookie(ck)
		platform.Logger(req.Context()).Info("operator signed in", zap.String("operator", email))
		return c.Redirect(http.StatusSeeOther, "/")
	}
}

// Logout clears the session cookie and sends the browser to /.
func (a *Authenticator) Logout(c echo.Context) error {
	ck := a.cookie("")
	ck.MaxAge = -1
	c.SetCookie(ck)
	return c.Redirect(http.StatusSeeOther, "/")
}

func (a *Authenticator) cookie(value string) *http.Cookie {
	return &http.Cookie{
		Name: CookieName, Value: value, Path: "/", HttpOnly: true, Secure: a.secure, SameSite: http.SameSiteStrictMode,
	}
}

// expiry reads the exp claim of a token Verify accepted.
func expiry(token string) (time.Time, error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return time.Time{}, err
	}
	var c jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil {
		return time.Time{}, err
	}
	if c.Expiry == nil {
		return time.Time{}, errors.New("no exp")
	}
	return c.Expiry.Time(), nil
}
