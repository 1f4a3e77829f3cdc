package outboxlib

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// GoogleIssuer is the issuer of the OIDC tokens Cloud Tasks attaches in production.
const GoogleIssuer = "https://accounts.google.com"

const (
	// tokenLeeway is the clock skew tolerated on exp, iat and nbf.
	tokenLeeway = time.Minute
	// maxTokenLifetime bounds exp - iat (plus tokenLeeway): Google's ID tokens, and the Tasks
	// emulator's, live one hour. A longer-lived token is not one Google issued, and accepting it
	// would let a leaked token be replayed far beyond the hour.
	maxTokenLifetime = time.Hour
	// jwksRefreshInterval rate-limits re-fetching the key set for an unknown kid, so a stream of
	// forged tokens cannot turn the consumer into a load generator against the issuer.
	jwksRefreshInterval = 30 * time.Second
	// jwksMaxAge is how long a fetched key set is used before it is fetched again (Google rotates
	// its keys every few weeks and publishes the next one well ahead; a removed key stops being
	// accepted within this time).
	jwksMaxAge = 6 * time.Hour
	// fetchTimeout bounds one discovery or JWKS fetch.
	fetchTimeout = 10 * time.Second
)

// ErrUnauthenticated is wrapped by Verify when the token is missing or not acceptable (401). Any
// other error from Verify means the keys could not be fetched: the token may be fine (503).
var ErrUnauthenticated = errors.New("unauthenticated")

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

// Verifier checks the OIDC ID tokens Cloud Tasks attaches to its requests (Authorization: Bearer):
// an RS256 signature by a key of the issuer's JWKS, the issuer, an accepted audience, exp and iat
// (both required, one minute of skew, a lifetime exp - iat of at most an hour plus that skew), and
// an allowed service-account e-mail with email_verified true (Google's service-account tokens
// carry it; a token without it is refused). Cloud Run IAM checks the token too in production;
// verifying it here keeps the consumer safe wherever it runs (locally, or with unauthenticated
// invocations allowed) and pins the caller to the relay's account.
//
// The discovery document and the JWKS are fetched on first use and cached; a token naming an
// unknown key id triggers a re-fetch at most every 30 s (key rotation). Safe for concurrent use.
type Verifier struct {
	cfg    VerifierConfig
	client *http.Client

	mu        sync.Mutex
	keys      *jose.JSONWebKeySet
	fetchedAt time.Time // of keys
	triedAt   time.Time // last fetch attempt, successful or not
	now       func() time.Time
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
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: fetchTimeout}
	}
	return &Verifier{cfg: cfg, client: client, now: time.Now}, nil
}

// idClaims are the claims of a Google ID token that Verify reads.
type idClaims struct {
	jwt.Claims
	Email         string `json:"email"`
	EmailVerified bool   `json:"email_verified"` // absent reads as false: refused
}

// Verify checks "Bearer <token>" and returns the caller's e-mail. Errors wrapping
// ErrUnauthenticated describe what is wrong with the token (never the token itself), so they can be
// logged.
func (v *Verifier) Verify(ctx context.Context, authorizationHeader string) (email string, err error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(authorizationHeader), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", fmt.Errorf("%w: no bearer token", ErrUnauthenticated)
	}
	tok, err := jwt.ParseSigned(strings.TrimSpace(token), []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if len(tok.Headers) != 1 || tok.Headers[0].KeyID == "" {
		return "", fmt.Errorf("%w: token has no key id", ErrUnauthenticated)
	}
	kid := tok.Headers[0].KeyID
	key, err := v.key(ctx, kid)
	if err != nil {
		return "", err
	}
	var c idClaims
	if err := tok.Claims(key.Key, &c); err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if c.Expiry == nil || c.IssuedAt == nil {
		return "", fmt.Errorf("%w: token lacks exp or iat", ErrUnauthenticated)
	}
	if lifetime := c.Expiry.Time().Sub(c.IssuedAt.Time()); lifetime > maxTokenLifetime+tokenLeeway {
		return "", fmt.Errorf("%w: token lifetime %s exceeds %s", ErrUnauthenticated, lifetime, maxTokenLifetime)
	}
	exp := jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: jwt.Audience(v.cfg.Audiences), Time: v.now()}
	// Google's tokens carry either form of its issuer.
	if v.cfg.Issuer == GoogleIssuer && c.Issuer == "accounts.google.com" {
		exp.Issuer = c.Issuer
	}
	if err := c.ValidateWithLeeway(exp, tokenLeeway); err != nil {
		return "", fmt.Errorf("%w: %v (iss %q, aud %q)", ErrUnauthenticated, err, c.Issuer, []string(c.Audience))
	}
	if !c.EmailVerified {
		return "", fmt.Errorf("%w: e-mail %q is not verified", ErrUnauthenticated, c.Email)
	}
	if !slices.Contains(v.cfg.AllowedEmails, c.Email) {
		return "", fmt.Errorf("%w: %w: e-mail %q is not allowed", ErrUnauthenticated, ErrNotAllowed, c.Email)
	}
	return c.Email, nil
}

// key returns the JWKS key kid. The key set is fetched at first use, when it is older than
// jwksMaxAge, and when it lacks kid (rotation); fetches are at most one per jwksRefreshInterval
// (one per second while none has succeeded), and while the issuer is unreachable the last set
// fetched keeps working.
func (v *Verifier) key(ctx context.Context, kid string) (jose.JSONWebKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	lookup := func() (jose.JSONWebKey, bool) {
		if v.keys == nil {
			return jose.JSONWebKey{}, false
		}
		ks := v.keys.Key(kid)
		if len(ks) == 0 {
			return jose.JSONWebKey{}, false
		}
		return ks[0], true
	}
	if v.keys != nil {
		k, known := lookup()
		if known && now.Sub(v.fetchedAt) < jwksMaxAge {
			return k, nil
		}
		if now.Sub(v.triedAt) < jwksRefreshInterval {
			if known {
				return k, nil
			}
			return jose.JSONWebKey{}, fmt.Errorf("%w: unknown key id %q", ErrUnauthenticated, kid)
		}
	} else if !v.triedAt.IsZero() && now.Sub(v.triedAt) < time.Second {
		return jose.JSONWebKey{}, errors.New("outboxlib: verifier: issuer keys unavailable (the last fetch failed)")
	}
	// Fetching under the lock makes concurrent verifications wait for the rare fetch instead of
	// sending a burst of identical ones.
	v.triedAt = now
	keys, err := v.fetchKeys(ctx)
	if err != nil {
		if k, known := lookup(); known {
			return k, nil // the last set fetched: better than failing while the issuer is down
		}
		return jose.JSONWebKey{}, err
	}
	v.keys, v.fetchedAt = keys, now
	if k, known := lookup(); known {
		return k, nil
	}
	return jose.JSONWebKey{}, fmt.Errorf("%w: unknown key id %q", ErrUnauthenticated, kid)
}

// fetchKeys reads the issuer's discovery document, then the JWKS it names.
func (v *Verifier) fetchKeys(ctx context.Context) (*jose.JSONWebKeySet, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := v.getJSON(ctx, strings.TrimSuffix(v.cfg.Issuer, "/")+"/.well-known/openid-configuration", &disc); err != nil {
		return nil, err
	}
	if disc.JWKSURI == "" {
		return nil, fmt.Errorf("outboxlib: verifier: discovery document of %s has no jwks_uri", v.cfg.Issuer)
	}
	if disc.Issuer != v.cfg.Issuer {
		return nil, fmt.Errorf("outboxlib: verifier: discovery document names issuer %q, want %q", disc.Issuer, v.cfg.Issuer)
	}
	var keys jose.JSONWebKeySet
	if err := v.getJSON(ctx, disc.JWKSURI, &keys); err != nil {
		return nil, err
	}
	return &keys, nil
}

func (v *Verifier) getJSON(ctx context.Context, url string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("outboxlib: verifier: %w", err)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return fmt.Errorf("outboxlib: verifier: GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("outboxlib: verifier: GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("outboxlib: verifier: GET %s: %s", url, resp.Status)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("outboxlib: verifier: GET %s: %w", url, err)
	}
	return nil
}
