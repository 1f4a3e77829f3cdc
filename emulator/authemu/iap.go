package authemu

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/mail"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Identity-Aware Proxy's signed header, as authemu stands in for it.
const (
	// IAPIssuer is the iss of IAP's assertions.
	IAPIssuer = "https://cloud.google.com/iap"
	// IAPLifetime is how long an assertion is valid: IAP's live ten minutes at most.
	IAPLifetime = 10 * time.Minute
	// DefaultIAPAudience is the aud of the assertions unless Options.IAPAudience says otherwise:
	// shaped like IAP's for a load balancer's backend service
	// (/projects/PROJECT_NUMBER/global/backendServices/SERVICE_ID), with zeros for the numbers.
	DefaultIAPAudience = "/projects/0/global/backendServices/0"
	// IAPJWKSPath is where the assertions' key is served, as a JWK set: the path of IAP's own
	// (https://www.gstatic.com/iap/verify/public_key-jwk).
	IAPJWKSPath = "/iap/verify/public_key-jwk"
	// IAPAssertionPath is the development endpoint that mints an assertion.
	IAPAssertionPath = "/iap/assertion"
	// IAPKeyFile is the assertions' signing key's file in Options.DataDir.
	IAPKeyFile = "authemu-iap-key.pem"
)

// iapIssuer signs the IAP assertions: an ES256 key, its JWK set, and another key under the same
// kid for ForgeIAP.
type iapIssuer struct {
	issuer, audience string
	signer, forger   jose.Signer
	jwks             []byte
}

func newIAPIssuer(opts Options) (*iapIssuer, error) {
	i := &iapIssuer{issuer: opts.IAPIssuer, audience: opts.IAPAudience}
	if i.issuer == "" {
		i.issuer = IAPIssuer
	}
	if i.audience == "" {
		i.audience = DefaultIAPAudience
	}
	var (
		key *ecdsa.PrivateKey
		err error
	)
	if opts.DataDir != "" {
		key, err = loadOrCreateECKey(filepath.Join(opts.DataDir, IAPKeyFile))
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		return nil, err
	}
	forgeKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("iap key: %w", err)
	}
	pub := jose.JSONWebKey{Key: &key.PublicKey, Algorithm: string(jose.ES256), Use: "sig"}
	thumb, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("iap key: %w", err)
	}
	pub.KeyID = base64.RawURLEncoding.EncodeToString(thumb[:12])
	if i.jwks, err = json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}}); err != nil {
		return nil, fmt.Errorf("iap key: %w", err)
	}
	if i.signer, err = newES256Signer(key, pub.KeyID); err == nil {
		i.forger, err = newES256Signer(forgeKey, pub.KeyID)
	}
	if err != nil {
		return nil, fmt.Errorf("iap key: %w", err)
	}
	return i, nil
}

func newES256Signer(key *ecdsa.PrivateKey, kid string) (jose.Signer, error) {
	return jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
}

// IAPJWKSURL is where the IAP assertions' key is, as a JWK set: what a verifier is given in place
// of https://www.gstatic.com/iap/verify/public_key-jwk.
func (s *Server) IAPJWKSURL() string { return s.URL() + IAPJWKSPath }

// IAPIssuer is the iss of the IAP assertions.
func (s *Server) IAPIssuer() string { return s.iap.issuer }

// IAPAudience is the aud of the IAP assertions.
func (s *Server) IAPAudience() string { return s.iap.audience }

// IAPClaims are what an IAP assertion says; the zero values of the optional fields give the
// assertion IAP would add to a request of the user right now.
type IAPClaims struct {
	Email string // email: the signed-in user's address; required
	// Subject is sub: IAP's stable id of the user; "" is "accounts.google.com:" and a number
	// derived from Email (the same one every time).
	Subject      string
	HostedDomain string        // hd: the user's Google Workspace domain; "" for none
	Issuer       string        // iss; "" is the server's IAP issuer
	Audience     string        // aud; "" is the server's IAP audience
	IssuedAt     time.Time     // iat; zero is now
	Lifetime     time.Duration // exp - iat; zero is IAPLifetime
}

// IAPAssertion returns a fresh assertion of the user email, as IAP adds to each of their requests.
func (s *Server) IAPAssertion(email string) (string, error) {
	return s.MintIAP(IAPClaims{Email: email})
}

// MintIAP returns an assertion with c's claims, signed ES256 by the IAP key. Tests mint expired
// assertions, assertions for another audience or of another issuer with it.
func (s *Server) MintIAP(c IAPClaims) (string, error) { return s.signIAP(s.iap.signer, c) }

// ForgeIAP returns an assertion with c's claims and the IAP key's kid, signed by another ES256
// key: what someone who reaches the service around the proxy and knows the key id can make.
// Verifiers must refuse it.
func (s *Server) ForgeIAP(c IAPClaims) (string, error) { return s.signIAP(s.iap.forger, c) }

// iapPayload is the payload of IAP's assertions: the registered claims, email and hd.
type iapPayload struct {
	jwt.Claims
	Email        string `json:"email"`
	HostedDomain string `json:"hd,omitempty"`
}

func (s *Server) signIAP(signer jose.Signer, c IAPClaims) (string, error) {
	if c.Email == "" {
		return "", errors.New("authemu: an IAP assertion needs the user's e-mail")
	}
	if c.Subject == "" {
		sum := sha256.Sum256([]byte(strings.ToLower(c.Email)))
		c.Subject = "accounts.google.com:" + strconv.FormatUint(binary.BigEndian.Uint64(sum[:8])>>1, 10)
	}
	if c.Issuer == "" {
		c.Issuer = s.iap.issuer
	}
	if c.Audience == "" {
		c.Audience = s.iap.audience
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = s.now()
	}
	if c.Lifetime == 0 {
		c.Lifetime = IAPLifetime
	}
	tok, err := jwt.Signed(signer).Claims(iapPayload{
		Claims: jwt.Claims{
			Issuer: c.Issuer, Subject: c.Subject, Audience: jwt.Audience{c.Audience},
			IssuedAt: jwt.NewNumericDate(c.IssuedAt), Expiry: jwt.NewNumericDate(c.IssuedAt.Add(c.Lifetime)),
		},
		Email: c.Email, HostedDomain: c.HostedDomain,
	}).Serialize()
	if err != nil {
		return "", fmt.Errorf("authemu: sign: %w", err)
	}
	return tok, nil
}

func (s *Server) serveIAPKeys(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Write(s.iap.jwks)
}

// IAPAssertionRequest is the body of POST /iap/assertion.
type IAPAssertionRequest struct {
	Email string `json:"email"`
}

// serveIAPAssertion is POST /iap/assertion: a development convenience. IAP has no such endpoint;
// it adds the assertion to the requests of users it has signed in.
func (s *Server) serveIAPAssertion(w http.ResponseWriter, r *http.Request) {
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	var req IAPAssertionRequest
	if err := dec.Decode(&req); err != nil {
		http.Error(w, `want a JSON body {"email": "USER"}: `+err.Error(), http.StatusBadRequest)
		return
	}
	if a, err := mail.ParseAddress(req.Email); err != nil || a.Address != req.Email {
		http.Error(w, "email is required: the signed-in user's address", http.StatusBadRequest)
		return
	}
	tok, err := s.IAPAssertion(req.Email)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.opts.Logf("authemu: minted an IAP assertion for %s", req.Email)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	io.WriteString(w, tok)
}

// loadOrCreateECKey reads the P-256 key at path, or creates it there (0600, the directory 0700)
// when there is none. As oidc.LoadOrCreateKey does for the RSA key, it creates the file
// exclusively: a key another process wrote first is read, never overwritten.
func loadOrCreateECKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		data, err = createECKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("iap key %s: %w", path, err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "EC PRIVATE KEY" {
		return nil, fmt.Errorf("iap key %s: not a PEM EC private key", path)
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("iap key %s: %w", path, err)
	}
	if key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("iap key %s: want a P-256 key (ES256)", path)
	}
	return key, nil
}

// createECKey writes a new P-256 key to path and returns its PEM; if the file appeared since it
// was read, the key in it.
func createECKey(path string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	return data, nil
}
