package outboxlib

import (
	"context"
	"errors"
	"net/http"
)

// VerifierConfig configures NewVerifier.
type VerifierConfig struct {
	Issuer        string   // "https://accounts.google.com" in production; the Tasks emulator's issuer URL locally
	Audiences     []string // accepted aud values (the consumer's URL)
	AllowedEmails []string // service accounts allowed to call (the relay's)
	HTTPClient    *http.Client
}

// Verifier checks the OIDC tokens Cloud Tasks attaches to its requests.
type Verifier struct {
	cfg VerifierConfig
}

// NewVerifier returns a verifier; discovery and JWKS are fetched lazily and cached.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	return &Verifier{cfg: cfg}, nil
}

// Verify checks "Bearer <token>" and returns the caller's e-mail.
func (v *Verifier) Verify(ctx context.Context, authorizationHeader string) (email string, err error) {
	return "", errors.New("not implemented")
}
