// Package authemu is the local stand-in for Identity Platform (Firebase Auth), the issuer of the
// customers' ID tokens in production: an OpenID Connect issuer that serves its discovery document
// and JWKS (emulator/oidc, the repository's one RS256 issuer) and mints customer ID tokens
// shaped like Identity Platform's, so that the orders service verifies them with the code it runs
// in production (platform.IDTokenVerifier), only its CUSTOMER_ISSUER and CUSTOMER_AUDIENCE differ.
//
// It answers, relative to its URL (which is also the tokens' iss):
//
//	GET  /.well-known/openid-configuration   the discovery document (jwks_uri = URL/jwks)
//	GET  /jwks                               the signing key as a JWK set
//	POST /token {"sub": "ali", "email": "ali@example.com"}
//	                                         an ID token for that customer, as text/plain
//
// POST /token is a development endpoint: it exists only here. In production nothing mints a
// customer's token on request; the customer signs in with Identity Platform and its client SDK
// (Firebase Auth's getIdToken) hands the app the token it sends to the order API.
//
// It is also the local stand-in for Identity-Aware Proxy's signed header (iap.go): IAP, in front
// of the operators' console in production, signs every request it lets through with an ES256 JWT
// in x-goog-iap-jwt-assertion (issuer https://cloud.google.com/iap, its keys a JWK set). authemu
// signs the same assertions with an ES256 key of its own, served as a JWK set:
//
//	GET  /iap/verify/public_key-jwk           the IAP signing key as a JWK set (IAPJWKSURL)
//	POST /iap/assertion {"email": "operator@example.com"}
//	                                         an assertion for that user, as text/plain
package authemu

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/spanmart/spanmart/emulator/oidc"
)

// TokenLifetime is how long a minted token is valid: Identity Platform's ID tokens expire after
// an hour (its client SDKs refresh them).
const TokenLifetime = time.Hour

// MaxSubjectLen is the longest sub POST /token takes: Identity Platform's uids are at most 128
// characters.
const MaxSubjectLen = 128

// KeyFile is the signing key's file in Options.DataDir.
const KeyFile = "authemu-key.pem"

// Options configures Start.
type Options struct {
	Host string // default 127.0.0.1
	Port int    // 0 picks a free port
	// Audience is the aud of the tokens: Identity Platform's is the project id. Required.
	Audience string
	// DataDir keeps the signing key (DataDir/KeyFile), so tokens minted before a restart still
	// verify after it; "" keeps it in memory.
	DataDir string
	// IAPIssuer is the iss of the IAP assertions; "" is IAPIssuer, IAP's own (the verifier is
	// given the key set's URL, so the issuer need not be where authemu listens).
	IAPIssuer string
	// IAPAudience is the aud of the IAP assertions; "" is DefaultIAPAudience.
	IAPAudience string
	// Logf receives one line per token minted (default: none).
	Logf func(format string, args ...any)
}

// Server is a running issuer.
type Server struct {
	opts   Options
	lis    net.Listener
	srv    *http.Server
	issuer *oidc.Issuer // discovery document and JWKS
	signer jose.Signer  // the issuer's key, with its kid
	forger jose.Signer  // another key under the same kid: Forge
	iap    *iapIssuer   // the IAP assertions' ES256 key (iap.go)
	now    func() time.Time
}

// Start starts the issuer and returns once it accepts connections; ctx bounds the start only.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Audience == "" {
		return nil, errors.New("authemu: an audience (the project id) is required")
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	var (
		key *rsa.PrivateKey
		err error
	)
	if opts.DataDir != "" {
		if key, err = oidc.LoadOrCreateKey(filepath.Join(opts.DataDir, KeyFile)); err != nil {
			return nil, fmt.Errorf("authemu: %w", err)
		}
	} else if key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, fmt.Errorf("authemu: %w", err)
	}
	forgeKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("authemu: %w", err)
	}
	iap, err := newIAPIssuer(opts)
	if err != nil {
		return nil, fmt.Errorf("authemu: %w", err)
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	if err != nil {
		return nil, fmt.Errorf("authemu: listen: %w", err)
	}
	s := &Server{opts: opts, lis: lis, iap: iap, now: time.Now}
	if s.issuer, err = oidc.NewIssuer(s.URL(), key); err != nil {
		lis.Close()
		return nil, fmt.Errorf("authemu: %w", err)
	}
	if s.signer, err = newSigner(key, s.issuer.KeyID()); err == nil {
		s.forger, err = newSigner(forgeKey, s.issuer.KeyID())
	}
	if err != nil {
		lis.Close()
		return nil, fmt.Errorf("authemu: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /.well-known/openid-configuration", s.issuer.Handler())
	mux.Handle("GET /jwks", s.issuer.Handler())
	mux.HandleFunc("POST /token", s.serveToken)
	mux.HandleFunc("GET "+IAPJWKSPath, s.serveIAPKeys)
	mux.HandleFunc("POST "+IAPAssertionPath, s.serveIAPAssertion)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(lis)
	return s, nil
}

func newSigner(key *rsa.PrivateKey, kid string) (jose.Signer, error) {
	return jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
}

// URL is the issuer: the iss of its tokens and the base of its discovery document.
func (s *Server) URL() string { return "http://" + s.lis.Addr().String() }

// Audience is the aud of its tokens.
func (s *Server) Audience() string { return s.opts.Audience }

// Close stops serving.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// Claims are what a token says; the zero values of the optional fields give the token Identity
// Platform would issue to a customer who just signed in.
type Claims struct {
	Subject       string // sub and user_id: the customer (Identity Platform: the uid); required
	Email         string // "" for none
	EmailVerified bool
	Issuer        string        // iss; "" is the server's URL
	Audience      string        // aud; "" is Options.Audience
	IssuedAt      time.Time     // iat; zero is now
	Lifetime      time.Duration // exp - iat; zero is TokenLifetime
	AuthTime      time.Time     // auth_time (when the customer signed in); zero is IssuedAt
}

// Token returns a fresh ID token of customer sub, with email (verified) when it is not "".
func (s *Server) Token(sub, email string) (string, error) {
	return s.Mint(Claims{Subject: sub, Email: email, EmailVerified: email != ""})
}

// Mint returns a token with c's claims, signed by the issuer's key. Tests mint expired tokens,
// tokens for another audience or of another issuer with it.
func (s *Server) Mint(c Claims) (string, error) { return s.sign(s.signer, c) }

// Forge returns a token with c's claims and the issuer's kid, signed by another key: what an
// attacker who knows the key id but not the key can make. Verifiers must refuse it.
func (s *Server) Forge(c Claims) (string, error) { return s.sign(s.forger, c) }

// idClaims is the payload of Identity Platform's ID tokens (the Firebase Admin SDKs'
// DecodedIdToken): the registered claims, user_id (= sub), email, email_verified, auth_time and
// the firebase object naming the sign-in provider and the identities.
type idClaims struct {
	jwt.Claims
	UserID        string           `json:"user_id"`
	Email         string           `json:"email,omitempty"`
	EmailVerified bool             `json:"email_verified,omitempty"`
	AuthTime      *jwt.NumericDate `json:"auth_time"`
	Firebase      firebaseClaim    `json:"firebase"`
}

type firebaseClaim struct {
	Identities     map[string][]string `json:"identities"`
	SignInProvider string              `json:"sign_in_provider"`
}

func (s *Server) sign(signer jose.Signer, c Claims) (string, error) {
	if c.Subject == "" {
		return "", errors.New("authemu: a subject is required")
	}
	if c.Issuer == "" {
		c.Issuer = s.URL()
	}
	if c.Audience == "" {
		c.Audience = s.opts.Audience
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = s.now()
	}
	if c.Lifetime == 0 {
		c.Lifetime = TokenLifetime
	}
	if c.AuthTime.IsZero() {
		c.AuthTime = c.IssuedAt
	}
	fb := firebaseClaim{Identities: map[string][]string{}, SignInProvider: "custom"}
	if c.Email != "" {
		fb = firebaseClaim{Identities: map[string][]string{"email": {c.Email}}, SignInProvider: "password"}
	}
	tok, err := jwt.Signed(signer).Claims(idClaims{
		Claims: jwt.Claims{
			Issuer: c.Issuer, Subject: c.Subject, Audience: jwt.Audience{c.Audience},
			IssuedAt: jwt.NewNumericDate(c.IssuedAt), Expiry: jwt.NewNumericDate(c.IssuedAt.Add(c.Lifetime)),
		},
		UserID: c.Subject, Email: c.Email, EmailVerified: c.EmailVerified,
		AuthTime: jwt.NewNumericDate(c.AuthTime), Firebase: fb,
	}).Serialize()
	if err != nil {
		return "", fmt.Errorf("authemu: sign: %w", err)
	}
	return tok, nil
}

// TokenRequest is the body of POST /token.
type TokenRequest struct {
	Subject string `json:"sub"`
	Email   string `json:"email"`
	// EmailVerified defaults to true when Email is given.
	EmailVerified *bool `json:"email_verified"`
}

// serveToken is POST /token: a development convenience, not an Identity Platform API.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	var req TokenRequest
	if err := dec.Decode(&req); err != nil {
		http.Error(w, `want a JSON body {"sub": "CUSTOMER", "email": "OPTIONAL"}: `+err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case strings.TrimSpace(req.Subject) == "":
		http.Error(w, "sub is required: the customer's id", http.StatusBadRequest)
		return
	case len(req.Subject) > MaxSubjectLen || !utf8.ValidString(req.Subject):
		http.Error(w, fmt.Sprintf("sub must be valid UTF-8 of at most %d bytes", MaxSubjectLen), http.StatusBadRequest)
		return
	}
	verified := req.Email != ""
	if req.EmailVerified != nil {
		verified = *req.EmailVerified
	}
	tok, err := s.Mint(Claims{Subject: req.Subject, Email: req.Email, EmailVerified: verified})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.opts.Logf("authemu: minted a token for sub %q", req.Subject)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	io.WriteString(w, tok)
}
