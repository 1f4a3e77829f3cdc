package consoletest

import (
	"context"
	"testing"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/services/console/internal/auth"
)

// IAPAudience is the audience of the tests' IAP assertions: the form IAP gives a load balancer's
// backend service.
const IAPAudience = "/projects/123456789012/global/backendServices/4242424242424242"

// StartIAP starts the local identity emulator (emulator/authemu), whose ES256 assertions stand in
// for Identity-Aware Proxy's signed header, for IAPAudience; closed when the test ends.
func StartIAP(t testing.TB) *authemu.Server {
	t.Helper()
	s, err := authemu.Start(context.Background(), authemu.Options{Audience: "spanmart-test", IAPAudience: IAPAudience})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// IAPConfig is the console's configuration behind s: its audience, issuer and key set.
func IAPConfig(s *authemu.Server) auth.IAPConfig {
	return auth.IAPConfig{Audience: s.IAPAudience(), Issuer: s.IAPIssuer(), JWKSURL: s.IAPJWKSURL()}
}

// Assertion mints an IAP assertion with c's claims (c.Email the user).
func Assertion(t testing.TB, s *authemu.Server, c authemu.IAPClaims) string {
	t.Helper()
	tok, err := s.MintIAP(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
