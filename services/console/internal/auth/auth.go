// Package auth is how the console knows who its user is. Two ways, one per deployment, never both:
//
//   - Behind Identity-Aware Proxy (production, IAPConfig.Audience set): IAP signs every request it
//     lets through with an ES256 JWT in x-goog-iap-jwt-assertion (issuer https://cloud.google.com/iap,
//     audience the protected resource's, the signed-in user's email), verified with
//     platform.IDTokenVerifier (the code every service verifies its callers' tokens with) against
//     IAP's key set, then the e-mail against the allow list. A request without the header reached
//     the service around the proxy and is refused (401), never served as anonymous; the ID-token
//     sign-in below is off, because it would be exactly such a way around the proxy.
//   - A Google ID token of an operator (the dev stack, or Cloud Run without IAP), verified for the
//     issuer, the console's own URL as audience and the allow list (outboxlib.Verifier), presented
//     either as Authorization: Bearer or in the session cookie that GET /login?token=... sets.
//
// The verified e-mail is what the console names in X-Spanmart-On-Behalf-Of when it calls a service.
//
// With an ID token, a session is the token itself: the console keeps no state, so any instance
// accepts any session, and a session ends when its token expires (an hour for Google's). Behind IAP
// the session is IAP's (its own cookie), and the console's pages hold no credential at all.
//
// Forms that change something (a replay) carry a CSRF token bound to the session: an HMAC keyed
// with the session's ID token, or behind IAP with a random value the console keeps in a cookie of
// its own (IAP's assertion may change from one request to the next, so it cannot key a token that
// must outlive the page). A page of another origin can neither read nor compute it (the cookies are
// HttpOnly and SameSite=Strict as well). A bearer token is a session too and needs the same: behind
// a proxy that adds the header to every request (gcloud run services proxy), the browser sends it
// without the page asking, exactly as it sends a cookie; so does IAP's session cookie.
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
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

// Identity-Aware Proxy's signed header.
const (
	// HeaderIAPAssertion is the header IAP adds to every request it lets through: its ES256 JWT
	// of the signed-in user. IAP strips any x-goog-* header the client sent, so through IAP it is
	// always IAP's own.
	HeaderIAPAssertion = "X-Goog-Iap-Jwt-Assertion"
	// IAPIssuer is the iss of IAP's assertions.
	IAPIssuer = "https://cloud.google.com/iap"
	// IAPJWKSURL is where IAP publishes its signing keys, as a JWK set.
	IAPJWKSURL = "https://www.gstatic.com/iap/verify/public_key-jwk"
	// IAPMaxLifetime bounds an assertion's exp - iat: IAP's live ten minutes at most.
	IAPMaxLifetime = 10 * time.Minute
	// IAPSignOut is where the sign-out sends the browser behind IAP: IAP answers the query
	// parameter itself, clearing its login cookie, before the request reaches the console.
	IAPSignOut = "/?gcp-iap-mode=CLEAR_LOGIN_COOKIE"
)

// Config configures New: the ID-token sign-in (Issuer, Audience) or IAP (IAP.Audience), not both.
type Config struct {
	Issuer   string   // OIDC_ISSUER: https://accounts.google.com in production
	Audience string   // OIDC_AUDIENCE: the console's own URL
	Allowed  []string // CONSOLE_ALLOWED_EMAILS: the operators
	IAP      IAPConfig
	// HTTPClient fetches the issuer's keys; nil means the verifier's default.
	HTTPClient *http.Client
}

// IAPConfig is the console behind Identity-Aware Proxy.
type IAPConfig struct {
	// Audience is the aud IAP's assertions carry for the console (CONSOLE_IAP_AUDIENCE): for a
	// load balancer's backend service /projects/PROJECT_NUMBER/global/backendServices/SERVICE_ID.
	// Set, it makes IAP's assertion the only way in.
	Audience string
	Issuer   string // CONSOLE_IAP_ISSUER; "" is IAPIssuer (another only for local tests)
	JWKSURL  string // CONSOLE_IAP_JWKS_URL; "" is IAPJWKSURL (locally authemu's)
}

// Authenticator verifies the console's users. Safe for concurrent use.
type Authenticator struct {
	// verifier checks the ID tokens of the bearer and the session cookie (nil behind IAP).
	verifier *outboxlib.Verifier
	// iap checks IAP's assertions (nil without IAP).
	iap      *platform.IDTokenVerifier
	allowed  []string
	audience string
	// secure marks the cookie Secure: the console is served over https (its URL, the audience,
	// says so; Cloud Run terminates TLS in front of it, so the request itself looks like http).
	secure bool
}

// New returns an authenticator for cfg.
func New(cfg Config) (*Authenticator, error) {
	if cfg.IAP.Audience != "" {
		return newIAP(cfg)
	}
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
	return &Authenticator{verifier: v, allowed: cfg.Allowed, audience: cfg.Audience, secure: u.Scheme == "https"}, nil
}

// newIAP returns the authenticator behind IAP: ES256 assertions of IAP's issuer and key set, at
// most ten minutes long, for the configured audience, of an allowed e-mail.
func newIAP(cfg Config) (*Authenticator, error) {
	var problems []string
	if cfg.Audience != "" {
		problems = append(problems, "an ID-token audience and IAP's are both set: behind IAP, IAP's assertion is the only sign-in")
	}
	if len(cfg.Allowed) == 0 {
		problems = append(problems, "at least one allowed e-mail is required")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("console auth: %s", strings.Join(problems, "; "))
	}
	issuer, jwks := cfg.IAP.Issuer, cfg.IAP.JWKSURL
	if issuer == "" {
		issuer = IAPIssuer
	}
	if jwks == "" {
		jwks = IAPJWKSURL
	}
	v, err := platform.NewIDTokenVerifier(platform.IDTokenVerifierConfig{
		Issuer: issuer, Audiences: []string{cfg.IAP.Audience}, JWKSURL: jwks,
		Algorithms: []jose.SignatureAlgorithm{jose.ES256}, MaxLifetime: IAPMaxLifetime, HTTPClient: cfg.HTTPClient,
	})
	if err != nil {
		return nil, fmt.Errorf("console auth: IAP: %w", err)
	}
	return &Authenticator{iap: v, allowed: slices.Clone(cfg.Allowed), audience: cfg.IAP.Audience}, nil
}

// Audience is the audience the users' tokens must carry: the console's URL, or behind IAP the
// audience of IAP's assertions.
func (a *Authenticator) Audience() string { return a.audience }

// BehindIAP says whether the users are IAP's (and the ID-token sign-in is off).
func (a *Authenticator) BehindIAP() bool { return a.iap != nil }

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
			id, ref := a.identify(c)
			if ref != nil {
				return refuse(c, *ref)
			}
			if req.Method != http.MethodGet && req.Method != http.MethodHead &&
				(id.CSRF == "" || !hmac.Equal([]byte(c.FormValue(FieldCSRF)), []byte(id.CSRF))) {
				platform.Logger(req.Context()).Warn("console request refused: CSRF token missing or wrong", zap.String("path", c.Path()))
				return refuse(c, Refusal{Status: http.StatusForbidden, Detail: "the form's CSRF token is missing or does not belong to this session: reload the page and try again"})
			}
			c.SetRequest(req.WithContext(WithIdentity(req.Context(), id)))
			return next(c)
		}
	}
}

// identify verifies IAP's assertion behind IAP; otherwise the bearer header, else the session
// cookie.
func (a *Authenticator) identify(c echo.Context) (Identity, *Refusal) {
	req := c.Request()
	if a.iap != nil {
		return a.identifyIAP(c)
	}
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

// identifyIAP verifies IAP's assertion and the e-mail it names. The Authorization header and the
// session cookie are not looked at: behind IAP they would be a way in that IAP never saw.
func (a *Authenticator) identifyIAP(c echo.Context) (Identity, *Refusal) {
	req := c.Request()
	ctx := req.Context()
	log := platform.Logger(ctx)
	assertion := req.Header.Get(HeaderIAPAssertion)
	if strings.TrimSpace(assertion) == "" {
		log.Warn("console request refused: no IAP assertion (the request did not come through Identity-Aware Proxy)")
		return Identity{}, &Refusal{Status: http.StatusUnauthorized, Detail: "no Identity-Aware Proxy assertion: this console is reached through IAP only"}
	}
	tok, err := a.iap.VerifyToken(ctx, assertion)
	switch {
	case errors.Is(err, platform.ErrUnauthenticated):
		// The reason names the assertion's iss and aud when those are what is wrong: how an
		// operator setting up IAP learns the audience IAP signs for.
		log.Warn("console request refused: bad IAP assertion", zap.String("reason", err.Error()))
		return Identity{}, &Refusal{Status: http.StatusUnauthorized, Detail: "the Identity-Aware Proxy assertion is not valid for this console (expired, another audience or issuer, or not signed by IAP)"}
	case err != nil:
		log.Warn("console request refused: cannot verify IAP assertions", zap.Error(err))
		return Identity{}, &Refusal{Status: http.StatusServiceUnavailable, Detail: "Identity-Aware Proxy's keys are unavailable; try again shortly"}
	}
	if tok.Email == "" || !slices.Contains(a.allowed, tok.Email) {
		log.Warn("console request refused: not an operator", zap.String("reason", fmt.Sprintf("IAP user %q is not allowed", tok.Email)))
		return Identity{}, &Refusal{Status: http.StatusForbidden, Detail: "this account is not an operator of the console (CONSOLE_ALLOWED_EMAILS)"}
	}
	secret := ""
	if ck, err := req.Cookie(CSRFCookieName); err == nil && len(ck.Value) == csrfSecretLen {
		secret = ck.Value
	} else if req.Method == http.MethodGet || req.Method == http.MethodHead {
		// A browser new to the console: its pages' forms are keyed with a secret of its own. A
		// POST never gets one: its form was rendered with some other secret, so it is refused.
		secret = newCSRFSecret()
		c.SetCookie(&http.Cookie{
			Name: CSRFCookieName, Value: secret, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
			Secure: req.TLS != nil || strings.EqualFold(req.Header.Get(echo.HeaderXForwardedProto), "https"),
		})
	}
	id := Identity{Email: tok.Email}
	if secret != "" {
		id.CSRF = csrfToken(secret + "\x00" + tok.Email)
	}
	return id, nil
}

// CSRFCookieName is the cookie that keys the CSRF tokens behind IAP: a random value per browser.
const CSRFCookieName = "console_csrf"

// csrfSecretLen is the length of the cookie's value: 32 random bytes, base64url.
const csrfSecretLen = 43

func newCSRFSecret() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
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
//
// Behind IAP there is nothing to sign in with: a request IAP let through is signed in, and /login
// sends it to /; any other is refused as the pages refuse it. A token in the URL is ignored.
func (a *Authenticator) Login(refuse RefuseFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if a.iap != nil {
			if _, ref := a.identify(c); ref != nil {
				return refuse(c, *ref)
			}
			return c.Redirect(http.StatusSeeOther, "/")
		}
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

// Logout clears the session cookie and sends the browser to /. Behind IAP it clears the CSRF
// cookie and sends the browser to IAP's sign-out (IAPSignOut), which clears IAP's login cookie.
func (a *Authenticator) Logout(c echo.Context) error {
	if a.iap != nil {
		c.SetCookie(&http.Cookie{Name: CSRFCookieName, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
		return c.Redirect(http.StatusSeeOther, IAPSignOut)
	}
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
