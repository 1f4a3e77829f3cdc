package tasksemu

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"cloud.google.com/go/compute/metadata"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/spanmart/spanmart/emulator/oidc"
)

// metadataClient is the official metadata client pointed at s, as a service finds it through
// GCE_METADATA_HOST.
func metadataClient(t *testing.T, s *Server) *metadata.Client {
	t.Setenv("GCE_METADATA_HOST", s.HTTPAddr())
	return metadata.NewClient(&http.Client{Timeout: 10 * time.Second})
}

func identitySuffix(account, audience string) string {
	return "instance/service-accounts/" + account + "/identity?audience=" + url.QueryEscape(audience) + "&format=full"
}

// The official client gets ID tokens from the emulator as it gets them from the metadata server,
// and they verify with the emulator's issuer: "default" is Options.ServiceAccount, any other
// account is named by its e-mail.
func TestMetadataIdentity(t *testing.T) {
	const sa = "relay@test-project.iam.gserviceaccount.com"
	s, _ := startServer(t, Options{ServiceAccount: sa})
	c := metadataClient(t, s)
	ctx := context.Background()
	const aud = "https://orders-abc123-uc.a.run.app"
	for _, tc := range []struct {
		account, email string
	}{
		{"default", sa},
		{"invoker@test-project.iam.gserviceaccount.com", "invoker@test-project.iam.gserviceaccount.com"},
	} {
		t.Run(tc.account, func(t *testing.T) {
			tok, err := c.GetWithContext(ctx, identitySuffix(tc.account, aud))
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.issuer.Verify(tok, aud, time.Now())
			if err != nil {
				t.Fatalf("token does not verify for audience %q: %v", aud, err)
			}
			want := oidc.Claims{Issuer: s.Issuer(), Email: tc.email, EmailVerified: true, Audience: []string{aud}}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(oidc.Claims{}, "Subject", "IssuedAt", "Expiry")); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
			if life := got.Expiry.Sub(got.IssuedAt); life != time.Hour {
				t.Errorf("exp - iat = %v, want 1h", life)
			}

			email, err := c.EmailWithContext(ctx, tc.account)
			if err != nil {
				t.Fatal(err)
			}
			if email != tc.email {
				t.Errorf("email = %q, want %q", email, tc.email)
			}
		})
	}
}

// Without audience the metadata server answers 400, which the client does not retry.
func TestMetadataIdentityWithoutAudience(t *testing.T) {
	c := metadataClient(t, emu)
	for _, suffix := range []string{
		"instance/service-accounts/default/identity",
		"instance/service-accounts/default/identity?audience=&format=full",
	} {
		_, err := c.GetWithContext(context.Background(), suffix)
		var merr *metadata.Error
		if !errors.As(err, &merr) || merr.Code != http.StatusBadRequest {
			t.Errorf("GET %s: err = %v, want a metadata.Error with code 400", suffix, err)
		}
	}
}

// A request without Metadata-Flavor: Google is refused, as by the metadata server; every answer
// carries Metadata-Flavor: Google, by which clients recognise the server.
func TestMetadataRequiresFlavorHeader(t *testing.T) {
	base := "http://" + emu.HTTPAddr() + "/computeMetadata/v1/"
	for _, suffix := range []string{identitySuffix("default", "https://a.example.com"), "instance/service-accounts/default/email"} {
		resp, err := http.Get(base + suffix)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Metadata-Flavor") != "Google" {
			t.Errorf("GET %s without Metadata-Flavor = %s, Metadata-Flavor %q, %q; want 403 with Metadata-Flavor Google",
				suffix, resp.Status, resp.Header.Get("Metadata-Flavor"), body)
		}
	}
}
