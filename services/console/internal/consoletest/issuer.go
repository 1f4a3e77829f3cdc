// Package consoletest is what the console's tests share: a test OIDC issuer that also answers the
// metadata server's identity endpoint (as the Tasks emulator does on the dev stack), the local
// identity emulator signing Identity-Aware Proxy's assertions (StartIAP), and a scenario of the
// services' answers installed on adminclienttest's fakes, which record every request the console
// makes.
package consoletest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/topology"
)

// Accounts of the tests: those of the dev stack.
var (
	Operator       = localcloud.Operator                  // allowed on the console
	ConsoleAccount = localcloud.Account(topology.Console) // the console's own
	Stranger       = "someone@example.com"                // a valid token of an account that is no operator
)

// Issuer is an OIDC issuer on an httptest server: discovery document, JWKS and
// GET /computeMetadata/v1/instance/service-accounts/{account}/identity?audience=..., which mints
// a token for any account as the Tasks emulator does.
type Issuer struct {
	*httptest.Server
	iss *oidc.Issuer
}

// NewIssuer starts an issuer, closed when the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /computeMetadata/v1/instance/service-accounts/{account}/identity", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Metadata-Flavor", "Google")
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "Metadata-Flavor header required", http.StatusForbidden)
			return
		}
		tok, err := i.iss.Mint(r.URL.Query().Get("audience"), r.PathValue("account"), time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		io.WriteString(w, tok)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { i.iss.Handler().ServeHTTP(w, r) })
	i.Server = httptest.NewServer(mux)
	t.Cleanup(i.Close)
	iss, err := oidc.NewIssuer(i.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	i.iss = iss
	return i
}

// Token mints an ID token of email for audience, issued now.
func (i *Issuer) Token(t testing.TB, audience, email string) string {
	t.Helper()
	return i.TokenAt(t, audience, email, time.Now())
}

// TokenAt mints an ID token of email for audience, issued at (valid for an hour from then).
func (i *Issuer) TokenAt(t testing.TB, audience, email string, at time.Time) string {
	t.Helper()
	tok, err := i.iss.Mint(audience, email, at)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Verify checks a token the issuer minted, for audience, and returns its claims.
func (i *Issuer) Verify(token, audience string) (oidc.Claims, error) {
	return i.iss.Verify(token, audience, time.Now())
}
