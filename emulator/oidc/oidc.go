// Package oidc mints Google-style OIDC ID tokens the way Cloud Tasks attaches them to HTTP tasks
// (Authorization: Bearer <RS256 JWT>), and publishes the signing key as an OpenID discovery
// document and a JWKS, so services under test verify the tokens with the same code they use
// against Google's issuer.
//
// It is the local stacks' one Google-style issuer: the Tasks emulator signs its tasks' and the
// metadata server's tokens with it, authemu builds the customers' identity provider on it, and
// tests mint, forge and verify tokens with it. It imports nothing of the repository.
package oidc

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const (
	// tokenLifetime is how long Google's ID tokens are valid.
	tokenLifetime = time.Hour
	// leeway is the clock skew Verify tolerates on exp, iat and nbf.
	leeway  = time.Minute
	keyBits = 2048
)

// Issuer signs RS256 ID tokens and serves its discovery document and JWKS. It is immutable after
// NewIssuer and safe for concurrent use (the dispatcher mints from many goroutines).
type Issuer struct {
	url    string
	key    *rsa.PrivateKey
	kid    string
	signer jose.Signer
	jwks   []byte
	config []byte

	cacheMu sync.Mutex
	cache   map[[2]string]cachedToken // by audience and email
}

type cachedToken struct {
	token  string
	issued time.Time
}

// TokenReuse is how long Token hands out the same token: a token stays valid for an hour, and
// Google's token sources likewise reuse one until shortly before it expires. Signing costs an
// RSA private-key operation (about a millisecond of CPU), which at hundreds of dispatches per
// second would dominate the emulator.
const TokenReuse = 5 * time.Minute

// Token returns an ID token for audience and email: one minted within TokenReuse before now,
// else a fresh one (see Mint).
func (i *Issuer) Token(audience, email string, now time.Time) (string, error) {
	k := [2]string{audience, email}
	i.cacheMu.Lock()
	c, ok := i.cache[k]
	i.cacheMu.Unlock()
	if ok && !now.Before(c.issued) && now.Sub(c.issued) < TokenReuse {
		return c.token, nil
	}
	tok, err := i.Mint(audience, email, now)
	if err != nil {
		return "", err
	}
	i.cacheMu.Lock()
	if i.cache == nil || len(i.cache) >= 1024 {
		i.cache = map[[2]string]cachedToken{}
	}
	i.cache[k] = cachedToken{token: tok, issued: now}
	i.cacheMu.Unlock()
	return tok, nil
}

// Claims are the claims of an ID token that Verify returns.
type Claims struct {
	Issuer, Subject, Email string
	EmailVerified          bool
	Audience               []string
	IssuedAt, Expiry       time.Time
}

// NewIssuer returns an issuer whose "iss" claim is issuerURL (e.g. "http://127.0.0.1:8124").
// key may be nil: a fresh 2048-bit RSA key is generated. The key id ("kid") is derived from the
// public key, so it is stable for a key.
func NewIssuer(issuerURL string, key *rsa.PrivateKey) (*Issuer, error) {
	u, err := url.Parse(issuerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("oidc: issuer URL %q: want an absolute http(s) URL", issuerURL)
	}
	if key == nil {
		if key, err = rsa.GenerateKey(rand.Reader, keyBits); err != nil {
			return nil, fmt.Errorf("oidc: generate key: %w", err)
		}
	}
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("oidc: invalid key: %w", err)
	}
	pub := jose.JSONWebKey{Key: &key.PublicKey, Algorithm: string(jose.RS256), Use: "sig"}
	kid, err := keyID(pub)
	if err != nil {
		return nil, err
	}
	pub.KeyID = kid
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"),
	)
	if err != nil {
		return nil, fmt.Errorf("oidc: signer: %w", err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})
	if err != nil {
		return nil, fmt.Errorf("oidc: marshal JWKS: %w", err)
	}
	config, err := json.Marshal(discovery{
		Issuer:          issuerURL,
		JWKSURI:         strings.TrimSuffix(issuerURL, "/") + "/jwks",
		SigningAlgs:     []string{string(jose.RS256)},
		ResponseTypes:   []string{"id_token"},
		SubjectTypes:    []string{"public"},
		ClaimsSupported: []string{"aud", "azp", "email", "email_verified", "exp", "iat", "iss", "sub"},
	})
	if err != nil {
		return nil, fmt.Errorf("oidc: marshal discovery document: %w", err)
	}
	return &Issuer{url: issuerURL, key: key, kid: kid, signer: signer, jwks: jwks, config: config}, nil
}

// discovery is the subset of OpenID Connect Discovery 1.0 metadata that token verifiers read.
type discovery struct {
	Issuer          string   `json:"issuer"`
	JWKSURI         string   `json:"jwks_uri"`
	SigningAlgs     []string `json:"id_token_signing_alg_values_supported"`
	ResponseTypes   []string `json:"response_types_supported"`
	SubjectTypes    []string `json:"subject_types_supported"`
	ClaimsSupported []string `json:"claims_supported"`
}

// keyID is the hex form of the first 20 bytes of the key's RFC 7638 SHA-256 thumbprint: stable for
// a key and shaped like Google's 40-hex-digit key ids.
func keyID(pub jose.JSONWebKey) (string, error) {
	tp, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("oidc: key thumbprint: %w", err)
	}
	return hex.EncodeToString(tp[:20]), nil
}

// KeyID returns the "kid" of the issuer's signing key.
func (i *Issuer) KeyID() string { return i.kid }

// idClaims is the JSON payload of a minted token.
type idClaims struct {
	jwt.Claims
	Email         string `json:"email,omitempty"`
	EmailVerified bool   `json:"email_verified"`
	AZP           string `json:"azp,omitempty"`
}

// Mint returns a signed ID token: header alg RS256, kid, typ JWT; claims iss, aud (audience),
// sub (a stable numeric-looking id derived from email), email, email_verified true,
// azp (= email), iat = now, exp = now + 1h.
func (i *Issuer) Mint(audience, email string, now time.Time) (string, error) {
	if audience == "" {
		return "", errors.New("oidc: mint token: empty audience")
	}
	if email == "" {
		return "", errors.New("oidc: mint token: empty email")
	}
	c := idClaims{
		Claims: jwt.Claims{
			Issuer:   i.url,
			Subject:  subject(email),
			Audience: jwt.Audience{audience},
			IssuedAt: jwt.NewNumericDate(now),
			Expiry:   jwt.NewNumericDate(now.Add(tokenLifetime)),
		},
		Email:         email,
		EmailVerified: true,
		AZP:           email,
	}
	tok, err := jwt.Signed(i.signer).Claims(c).Serialize()
	if err != nil {
		return "", fmt.Errorf("oidc: mint token: %w", err)
	}
	return tok, nil
}

// subject derives a 21-digit decimal id from email, shaped like the "sub" Google issues for a
// service account and stable across restarts.
func subject(email string) string {
	h := sha256.Sum256([]byte(email))
	return fmt.Sprintf("1%020d", binary.BigEndian.Uint64(h[:8]))
}

// Verify checks a token the way a consumer would (RS256 signature with the JWKS key, iss, aud,
// exp with 1 minute leeway) and returns its claims; it exists for tests and local tooling.
func (i *Issuer) Verify(token, audience string, now time.Time) (Claims, error) {
	if audience == "" {
		return Claims{}, errors.New("oidc: verify token: empty audience")
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return Claims{}, fmt.Errorf("oidc: verify token: %w", err)
	}
	// A consumer picks the JWKS key by kid, so a token naming another key would not verify there.
	if len(tok.Headers) != 1 || tok.Headers[0].KeyID != i.kid {
		return Claims{}, errors.New("oidc: verify token: kid does not name the issuer's key")
	}
	var c idClaims
	if err := tok.Claims(&i.key.PublicKey, &c); err != nil {
		return Claims{}, fmt.Errorf("oidc: verify token: %w", err)
	}
	if c.Expiry == nil {
		return Claims{}, errors.New("oidc: verify token: no exp claim")
	}
	err = c.ValidateWithLeeway(jwt.Expected{Issuer: i.url, AnyAudience: jwt.Audience{audience}, Time: now}, leeway)
	if err != nil {
		return Claims{}, fmt.Errorf("oidc: verify token: %w", err)
	}
	out := Claims{
		Issuer:        c.Issuer,
		Subject:       c.Subject,
		Email:         c.Email,
		EmailVerified: c.EmailVerified,
		Audience:      []string(c.Audience),
		Expiry:        c.Expiry.Time().UTC(),
	}
	if c.IssuedAt != nil {
		out.IssuedAt = c.IssuedAt.Time().UTC()
	}
	return out, nil
}

// Handler serves GET /.well-known/openid-configuration and GET /jwks (the public key as a JWK
// set: kty RSA, alg RS256, use sig, kid, n, e). Other paths answer 404. The paths are relative to
// the issuer URL; mount the handler under http.StripPrefix when the issuer URL has a path.
func (i *Issuer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", serveJSON(i.config))
	mux.HandleFunc("GET /jwks", serveJSON(i.jwks))
	return mux
}

func serveJSON(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
}

// LoadOrCreateKey reads a PEM (PKCS#1 or PKCS#8) RSA private key from path, or creates one there
// (mode 0600) if the file does not exist, so tokens stay verifiable across emulator restarts with
// a data directory.
func LoadOrCreateKey(path string) (*rsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return parseKey(path, data)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("oidc: read key: %w", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, keyBits)
	if err != nil {
		return nil, fmt.Errorf("oidc: generate key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("oidc: create key directory: %w", err)
	}
	data = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	// O_EXCL: if another process created the key since ReadFile, use its key rather than
	// overwrite one whose tokens may already be in flight.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		// Read once more rather than recurse: a dangling symlink at path is "not there" to
		// ReadFile yet "exists" to O_EXCL, and must give an error, not a loop.
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("oidc: read key: %w", err)
		}
		return parseKey(path, data)
	}
	if err != nil {
		return nil, fmt.Errorf("oidc: create key: %w", err)
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("oidc: write key: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("oidc: write key: %w", err)
	}
	return key, nil
}

func parseKey(path string, data []byte) (*rsa.PrivateKey, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, fmt.Errorf("oidc: key %s: no RSA PRIVATE KEY or PRIVATE KEY PEM block", path)
		}
		switch b.Type {
		case "RSA PRIVATE KEY":
			k, err := x509.ParsePKCS1PrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("oidc: key %s: %w", path, err)
			}
			return k, nil
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("oidc: key %s: %w", path, err)
			}
			rk, ok := k.(*rsa.PrivateKey)
			if !ok {
				return nil, fmt.Errorf("oidc: key %s: %T is not an RSA key", path, k)
			}
			return rk, nil
		}
	}
}
