package platform

import (
	"context"
	"crypto/sha256"
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

// GoogleIssuer is the issuer of Google's ID tokens: those Cloud Tasks attaches to its requests and
// those the metadata server mints for a service account.
const GoogleIssuer = "https://accounts.google.com"

const (
	// idTokenLeeway is the clock skew tolerated on exp, iat, nbf and auth_time.
	idTokenLeeway = time.Minute
	// DefaultMaxIDTokenLifetime bounds exp - iat (plus the minute of skew): Google's ID tokens, the
	// Tasks emulator's, and Identity Platform's (Firebase Auth's) all live one hour. A longer-lived
	// token is not one those issuers issued, and accepting it would let a leaked token be replayed
	// far beyond the hour.
	DefaultMaxIDTokenLifetime = time.Hour
	// jwksRefreshInterval rate-limits re-fetching the key set for an unknown kid, so a stream of
	// forged tokens cannot turn the verifier into a load generator against the issuer.
	jwksRefreshInterval = 30 * time.Second
	// jwksMaxAge is how long a fetched key set is used before it is fetched again (Google rotates
	// its keys every few weeks and publishes the next one well ahead; a removed key stops being
	// accepted within this time).
	jwksMaxAge = 6 * time.Hour
	// jwksFetchTimeout bounds one discovery or JWKS fetch.
	jwksFetchTimeout = 10 * time.Second
	// maxBearerLen bounds the Authorization header's token before it is parsed: Google's and
	// Identity Platform's ID tokens are about 1 KiB (more with custom claims, which Identity
	// Platform caps at 1,000 bytes); anything far larger is not one of theirs.
	maxBearerLen = 16 << 10
)

// ErrUnauthenticated is wrapped by IDTokenVerifier.Verify when the token is missing or not
// acceptable (a 401). Any other error from Verify means the issuer's keys could not be fetched:
// the token may be fine (a 503).
var ErrUnauthenticated = errors.New("unauthenticated")

// IDTokenVerifierConfig configures NewIDTokenVerifier.
type IDTokenVerifierConfig struct {
	// Issuer is the iss every token must carry, and where the discovery document is
	// (Issuer + "/.well-known/openid-configuration", OpenID Connect Discovery 1.0 §4), unless
	// JWKSURL is set.
	Issuer string
	// Audiences are the accepted aud values: a token must name at least one.
	Audiences []string
	// JWKSURL, when set, is where the issuer's keys are, and no discovery document is read.
	JWKSURL string
	// Algorithms are the accepted signature algorithms (the header's alg); nil means RS256, that
	// of Google's and Identity Platform's ID tokens. Identity-Aware Proxy signs its assertions
	// ES256 (services/console). A token of another algorithm is refused before any key is looked
	// up, so an issuer's key is only ever used with the algorithms its verifier names.
	Algorithms []jose.SignatureAlgorithm
	// MaxLifetime bounds exp - iat; zero means DefaultMaxIDTokenLifetime.
	MaxLifetime time.Duration
	// HTTPClient fetches the discovery document and the keys; nil means a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now (tests of expiry and of the refresh rate limit).
	Now func() time.Time
}

// IDToken is what a verified ID token says.
type IDToken struct {
	Issuer   string
	Subject  string // sub: the account (Google) or user (Identity Platform: the uid)
	Audience []string
	Email    string
	// EmailVerified is the email_verified claim; absent reads as false.
	EmailVerified bool
	IssuedAt      time.Time
	Expiry        time.Time
	// AuthTime is when the user signed in (auth_time), zero when the token has none (Google's
	// service-account tokens); a token refreshed within one sign-in keeps it.
	AuthTime time.Time
}

// IDTokenVerifier checks OpenID Connect ID tokens presented as "Authorization: Bearer <JWT>" (Verify)
// or as a bare JWT (VerifyToken, for a token carried in a header of its own): an RS256 signature
// (or one of Algorithms) by a key of the issuer's JWKS (picked by the header's kid), the issuer, an
// accepted audience, exp and iat (both required, one minute of skew, iat not in the future, a
// lifetime exp - iat of at most MaxLifetime plus that skew), nbf and auth_time (when present) not
// in the future, and a non-empty sub. It is the one verifier of the repository: the event
// consumers' and operators' Google ID tokens (pkg/outboxlib, which adds the accounts it allows)
// the customers' Identity Platform tokens (services/orders) and the operators' Identity-Aware
// Proxy assertions (services/console: ES256, IAP's issuer and key set) go through it with
// different configurations.
//
// The discovery document and the JWKS are fetched on first use and cached; a token naming an
// unknown key id triggers a re-fetch at most every 30 s (key rotation), and while the issuer is
// unreachable the last key set fetched keeps working. Safe for concurrent use.
type IDTokenVerifier struct {
	cfg    IDTokenVerifierConfig
	client *http.Client

	mu        sync.Mutex
	keys      *jose.JSONWebKeySet
	fetchedAt time.Time // of keys
	triedAt   time.Time // last fetch attempt, successful or not

	// verified are tokens that passed every check, by the SHA-256 of their text. A caller sends
	// the same token for up to an hour (the relay's nudges, Cloud Tasks' deliveries, a customer's
	// app), and parsing and checking an RS256 signature for each request was about 5 % of every
	// service's CPU under load; a token seen before is only checked against the clock again.
	verifiedMu sync.Mutex
	verified   map[[sha256.Size]byte]verifiedToken
}

// verifiedToken is a token that passed every check, and the key id that signed it.
type verifiedToken struct {
	token IDToken
	kid   string
}

// maxVerifiedTokens bounds the cache of verified tokens; when it is full it starts again empty.
const maxVerifiedTokens = 4096

// NewIDTokenVerifier returns a verifier; discovery and JWKS are fetched lazily.
func NewIDTokenVerifier(cfg IDTokenVerifierConfig) (*IDTokenVerifier, error) {
	var problems []string
	if cfg.Issuer == "" {
		problems = append(problems, "issuer is required")
	}
	if len(cfg.Audiences) == 0 || slices.Contains(cfg.Audiences, "") {
		problems = append(problems, "at least one audience is required, none empty")
	}
	if cfg.MaxLifetime < 0 {
		problems = append(problems, "the maximum lifetime must not be negative")
	}
	for _, alg := range cfg.Algorithms {
		if !slices.Contains(asymmetricAlgorithms, alg) {
			problems = append(problems, fmt.Sprintf("algorithm %q is not an asymmetric signature algorithm", alg))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("id token verifier: %s", strings.Join(problems, "; "))
	}
	if cfg.MaxLifetime == 0 {
		cfg.MaxLifetime = DefaultMaxIDTokenLifetime
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = []jose.SignatureAlgorithm{jose.RS256}
	}
	cfg.Algorithms = slices.Clone(cfg.Algorithms)
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: jwksFetchTimeout}
	}
	return &IDTokenVerifier{cfg: cfg, client: client}, nil
}

// asymmetricAlgorithms are the algorithms Algorithms may name: those verified with a public key of
// a JWKS. A shared-secret algorithm (HS256) would make the issuer's public key a secret anyone can
// sign with.
var asymmetricAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// idTokenClaims are the claims Verify reads.
type idTokenClaims struct {
	jwt.Claims
	Email         string           `json:"email"`
	EmailVerified bool             `json:"email_verified"` // absent reads as false
	AuthTime      *jwt.NumericDate `json:"auth_time"`
}

// Verify checks "Bearer <token>" and returns what the token says. Errors wrapping
// ErrUnauthenticated describe what is wrong with the token (never the token itself), so they can be
// logged.
func (v *IDTokenVerifier) Verify(ctx context.Context, authorizationHeader string) (IDToken, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(authorizationHeader), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return IDToken{}, fmt.Errorf("%w: no bearer token", ErrUnauthenticated)
	}
	return v.VerifyToken(ctx, token)
}

// VerifyToken checks a token given bare (the JWT itself, as Identity-Aware Proxy's
// x-goog-iap-jwt-assertion header carries it) exactly as Verify checks a bearer token.
func (v *IDTokenVerifier) VerifyToken(ctx context.Context, token string) (IDToken, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return IDToken{}, fmt.Errorf("%w: no token", ErrUnauthenticated)
	}
	if len(token) > maxBearerLen {
		return IDToken{}, fmt.Errorf("%w: token of %d bytes, more than %d", ErrUnauthenticated, len(token), maxBearerLen)
	}
	sum := sha256.Sum256([]byte(token))
	if t, ok := v.cached(sum); ok {
		return t, nil
	}
	tok, err := jwt.ParseSigned(token, v.cfg.Algorithms)
	if err != nil {
		return IDToken{}, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if len(tok.Headers) != 1 || tok.Headers[0].KeyID == "" {
		return IDToken{}, fmt.Errorf("%w: token has no key id", ErrUnauthenticated)
	}
	key, err := v.key(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return IDToken{}, err
	}
	var c idTokenClaims
	if err := tok.Claims(key.Key, &c); err != nil {
		return IDToken{}, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	if c.Expiry == nil || c.IssuedAt == nil {
		return IDToken{}, fmt.Errorf("%w: token lacks exp or iat", ErrUnauthenticated)
	}
	if lifetime := c.Expiry.Time().Sub(c.IssuedAt.Time()); lifetime > v.cfg.MaxLifetime+idTokenLeeway {
		return IDToken{}, fmt.Errorf("%w: token lifetime %s exceeds %s", ErrUnauthenticated, lifetime, v.cfg.MaxLifetime)
	}
	now := v.cfg.Now()
	exp := jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: jwt.Audience(v.cfg.Audiences), Time: now}
	// Google's tokens carry either form of its issuer.
	if v.cfg.Issuer == GoogleIssuer && c.Issuer == "accounts.google.com" {
		exp.Issuer = c.Issuer
	}
	if err := c.ValidateWithLeeway(exp, idTokenLeeway); err != nil {
		return IDToken{}, fmt.Errorf("%w: %v (iss %q, aud %q)", ErrUnauthenticated, err, c.Issuer, []string(c.Audience))
	}
	if c.Subject == "" {
		return IDToken{}, fmt.Errorf("%w: token has no sub", ErrUnauthenticated)
	}
	out := IDToken{
		Issuer: c.Issuer, Subject: c.Subject, Audience: []string(c.Audience), Email: c.Email,
		EmailVerified: c.EmailVerified, IssuedAt: c.IssuedAt.Time().UTC(), Expiry: c.Expiry.Time().UTC(),
	}
	if c.AuthTime != nil {
		// Identity Platform: auth_time "must be in the past" (when the user signed in).
		if out.AuthTime = c.AuthTime.Time().UTC(); out.AuthTime.After(now.Add(idTokenLeeway)) {
			return IDToken{}, fmt.Errorf("%w: auth_time %s is in the future", ErrUnauthenticated, out.AuthTime.Format(time.RFC3339))
		}
	}
	v.remember(sum, out, tok.Headers[0].KeyID)
	return out, nil
}

// cached returns the token verified before whose text hashes to sum, if it has not expired since
// (the same minute of skew as a first verification) and the key that signed it is still in the
// issuer's key set (a key the issuer retired signs nothing valid any more); otherwise the token is
// forgotten and verified again from scratch.
func (v *IDTokenVerifier) cached(sum [sha256.Size]byte) (IDToken, bool) {
	v.verifiedMu.Lock()
	vt, ok := v.verified[sum]
	v.verifiedMu.Unlock()
	if !ok {
		return IDToken{}, false
	}
	v.mu.Lock()
	current := v.keys != nil && len(v.keys.Key(vt.kid)) > 0
	v.mu.Unlock()
	if !current || !v.cfg.Now().Before(vt.token.Expiry.Add(idTokenLeeway)) {
		v.verifiedMu.Lock()
		delete(v.verified, sum)
		v.verifiedMu.Unlock()
		return IDToken{}, false
	}
	t := vt.token
	t.Audience = slices.Clone(t.Audience) // the caller's to keep
	return t, true
}

func (v *IDTokenVerifier) remember(sum [sha256.Size]byte, t IDToken, kid string) {
	v.verifiedMu.Lock()
	defer v.verifiedMu.Unlock()
	if v.verified == nil || len(v.verified) >= maxVerifiedTokens {
		v.verified = make(map[[sha256.Size]byte]verifiedToken)
	}
	t.Audience = slices.Clone(t.Audience) // the caller keeps the one it was given
	v.verified[sum] = verifiedToken{token: t, kid: kid}
}

// key returns the JWKS key kid. The key set is fetched at first use, when it is older than
// jwksMaxAge, and when it lacks kid (rotation); fetches are at most one per jwksRefreshInterval
// (one per second while none has succeeded), and while the issuer is unreachable the last set
// fetched keeps working.
func (v *IDTokenVerifier) key(ctx context.Context, kid string) (jose.JSONWebKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.cfg.Now()
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
		return jose.JSONWebKey{}, fmt.Errorf("id token verifier: keys of %s unavailable (the last fetch failed)", v.cfg.Issuer)
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

// fetchKeys reads the issuer's discovery document, then the JWKS it names (or JWKSURL).
func (v *IDTokenVerifier) fetchKeys(ctx context.Context) (*jose.JSONWebKeySet, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jwksFetchTimeout)
	defer cancel()
	jwksURL := v.cfg.JWKSURL
	if jwksURL == "" {
		var disc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := v.getJSON(ctx, strings.TrimSuffix(v.cfg.Issuer, "/")+"/.well-known/openid-configuration", &disc); err != nil {
			return nil, err
		}
		if disc.JWKSURI == "" {
			return nil, fmt.Errorf("id token verifier: discovery document of %s has no jwks_uri", v.cfg.Issuer)
		}
		// OpenID Connect Discovery 1.0 §4.3: the issuer named must be the one asked about.
		if disc.Issuer != v.cfg.Issuer {
			return nil, fmt.Errorf("id token verifier: discovery document names issuer %q, want %q", disc.Issuer, v.cfg.Issuer)
		}
		jwksURL = disc.JWKSURI
	}
	var keys jose.JSONWebKeySet
	if err := v.getJSON(ctx, jwksURL, &keys); err != nil {
		return nil, err
	}
	return &keys, nil
}

func (v *IDTokenVerifier) getJSON(ctx context.Context, url string, dst any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("id token verifier: %w", err)
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return fmt.Errorf("id token verifier: GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("id token verifier: GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("id token verifier: GET %s: %s", url, resp.Status)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("id token verifier: GET %s: %w", url, err)
	}
	return nil
}
