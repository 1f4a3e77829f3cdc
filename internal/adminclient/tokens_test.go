package adminclient_test

import (
	"context"
	"testing"

	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/adminclient/adminclienttest"
)

// NewMetadataTokens with a Host asks that metadata server (the dev stack's Tasks emulator) for
// the account's tokens, one per service URL, whatever GCE_METADATA_HOST says.
func TestMetadataTokensAtHost(t *testing.T) {
	emu, err := tasksemu.Start(context.Background(), tasksemu.Options{ServiceAccount: "relay@spanmart-local.iam.gserviceaccount.com"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	t.Setenv("GCE_METADATA_HOST", "127.0.0.1:1") // nothing listens there: the Host must win

	stack := adminclienttest.Start(t)
	stack.Scenario()
	for _, tt := range []struct{ account, host, want string }{
		{operator, emu.HTTPAddr(), operator},
		{"", "http://" + emu.HTTPAddr(), "relay@spanmart-local.iam.gserviceaccount.com"}, // the default account
	} {
		c, err := adminclient.New(adminclient.Config{URLs: stack.URLs(), Tokens: adminclient.NewMetadataTokens(adminclient.MetadataOptions{Account: tt.account, Host: tt.host})})
		if err != nil {
			t.Fatal(err)
		}
		before := len(stack.Requests(""))
		if _, err := c.OutboxStatus(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.StuckOrders(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, r := range stack.Requests("")[before:] {
			email, aud := adminclienttest.TokenClaims(t, r.Header.Get("Authorization"))
			if email != tt.want || aud != stack.URL(r.Service) {
				t.Errorf("account %q: token to %s is of %q for %q, want %q for %q", tt.account, r.Service, email, aud, tt.want, stack.URL(r.Service))
			}
		}
	}
}

// Without a Host the metadata client's own (GCE_METADATA_HOST) is asked.
func TestMetadataTokensFromEnvironment(t *testing.T) {
	emu, err := tasksemu.Start(context.Background(), tasksemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	t.Setenv("GCE_METADATA_HOST", emu.HTTPAddr())
	tok, err := adminclient.NewMetadataTokens(adminclient.MetadataOptions{Account: operator}).Token(context.Background(), "http://127.0.0.1:8085")
	if err != nil {
		t.Fatal(err)
	}
	if email, aud := adminclienttest.TokenClaims(t, tok); email != operator || aud != "http://127.0.0.1:8085" {
		t.Errorf("token of %q for %q", email, aud)
	}
}
