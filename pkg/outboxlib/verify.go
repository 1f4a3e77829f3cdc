package outboxlib

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spanmart/spanmart/pkg/platform"
)

// GoogleIssuer is the issuer of the OIDC tokens Cloud Tasks attaches in production.
const GoogleIssuer = platform.GoogleIssuer

// ErrUnauthenticated is wrapped by Verify when the token is missing or not acceptable (401). Any
// other error from Verify means the keys could not be fetched: the token may be fine (503). It is
// platform.ErrUnauthenticated: the checks of the token itself are platform.IDTokenVerifier's.
var ErrUnauthenticated = platform.ErrUnauthenticated

// ErrNotAllowed is wrapped (with ErrUnauthenticated) when a valid token's e-mail is not among the
// allowed ones: authenticated, but not authorized (403 rather than 401 where that matters).
var ErrNotAllowed = errors.New("caller not allowed")

// VerifierConfig configures NewVerifier.
type VerifierConfig struct {
	Issuer        string   // "https://accounts.google.com" in production; the Tasks emulator's issuer URL locally
	Audiences     []string // accepted aud values (the consumer's URL)
	AllowedEmails []string // service accounts allowed to call (the relay's)
	HTTPClient    *http.Client
}

// Verifier checks the Google ID tokens of service accounts and operators (Authorization: Bearer):
// the token itself as platform.IDTokenVerifier does (RS256 signature by a key of the issuer's
// JWKS, issuer, an accepted audience, exp and iat with one minute of skew, a lifetime of at most an
// hour plus that skew), then an allowed service-account e-mail with email_verified true (Google's
// service-account tokens carry it; a token without it is refused). Cloud Run IAM checks the token
// too in production; verifying it here keeps the consumer safe wherever it runs (locally, or with
// unauthenticated invocations allowed) and pins the caller to the relay's account.
//
// The keys are fetched and cached by the platform verifier (rotation, rate limit, the last set
// kept while the issuer is down). Safe for concurrent use.
type Verifier struct {
	cfg    VerifierConfig
	tokens *platform.IDTokenVerifier
	now    func() time.Time
}

// NewVerifier returns a verifier; discovery and JWKS are fetched lazily and cached.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	var problems []string
	if cfg.Issuer == "" {
		problems = append(problems, "issuer is required")
	}
	if len(cfg.Audiences) == 0 {
		problems = append(problems, "at least one audience is required")
	}
	if len(cfg.AllowedEmails) == 0 {
		problems = append(problems, "at least one allowed e-mail is required")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("outboxlib: verifier: %s", strings.Join(problems, "; "))
	}
	v := &Verifier{cfg: cfg, now: time.Now}
	tokens, err := platform.NewIDTokenVerifier(platform.IDTokenVerifierConfig{
		Issuer: cfg.Issuer, Audiences: cfg.Audiences, HTTPClient: cfg.HTTPClient,
		Now: func() time.Time { return v.now() }, // SetVerifierClock, in tests
	})
	if err != nil {
		return nil, fmt.Errorf("outboxlib: verifier: %w", err)
	}
	v.tokens = tokens
	return v, nil
}

// Verify checks "Bearer <token>" and returns the caller's e-mail. Errors wrapping
// ErrUnauthenticated describe what is wrong with the token (never the token itself), so they can be
// logged.
func (v *Verifier) Verify(ctx context.Context, authorizationHeader string) (email string, err error) {
	tok, err := v.tokens.Verify(ctx, authorizationHeader)
	if err != nil {
		return "", err
	}
	if !tok.EmailVerified {
		return "", fmt.Errorf("%w: e-mail %q is not verified", ErrUnauthenticated, tok.Email)
	}
	if !slices.Contains(v.cfg.AllowedEmails, tok.Email) {
		return "", fmt.Errorf("%w: %w: e-mail %q is not allowed", ErrUnauthenticated, ErrNotAllowed, tok.Email)
	}
	return tok.Email, nil
}
