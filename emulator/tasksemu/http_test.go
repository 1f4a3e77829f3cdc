package tasksemu

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"

	"github.com/spanmart/spanmart/emulator/oidc"
)

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func TestOIDCToken(t *testing.T) {
	tg := newTarget(t, nil)
	q := createQueue(t, ct, nil).Name
	const sa = "invoker@test-project.iam.gserviceaccount.com"
	withAud := httpTask(tg.URL + "/a?x=1")
	withAud.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: sa, Audience: "https://orders.example.com"}}
	createTask(t, ct, q, withAud)
	ds := tg.waitDeliveries(t, 1, 5*time.Second)
	noAud := httpTask(tg.URL + "/b")
	noAud.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: sa}}
	createTask(t, ct, q, noAud)
	ds = tg.waitDeliveries(t, 2, 5*time.Second)

	for i, aud := range []string{"https://orders.example.com", tg.URL + "/b"} {
		h := ds[i].header.Get("Authorization")
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			t.Fatalf("delivery %d: Authorization = %q, want a bearer token", i, h)
		}
		claims, err := emu.issuer.Verify(tok, aud, time.Now())
		if err != nil {
			t.Fatalf("delivery %d: token does not verify for audience %q: %v", i, aud, err)
		}
		if claims.Email != sa || claims.Issuer != emu.Issuer() || claims.Expiry.Sub(claims.IssuedAt) != time.Hour {
			t.Errorf("delivery %d: claims %+v, want email %q, iss %q, exp = iat+1h", i, claims, sa, emu.Issuer())
		}
	}

	// The issuer publishes its discovery document and keys at the address in iss.
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	getJSON(t, emu.Issuer()+"/.well-known/openid-configuration", &disc)
	if disc.Issuer != emu.Issuer() {
		t.Errorf("issuer = %q, want %q", disc.Issuer, emu.Issuer())
	}
	var jwks struct {
		Keys []map[string]any `json:"keys"`
	}
	getJSON(t, disc.JWKSURI, &jwks)
	if len(jwks.Keys) == 0 || jwks.Keys[0]["kty"] != "RSA" {
		t.Errorf("jwks = %v, want an RSA key", jwks)
	}
}

func TestNoAuthorizationWithoutToken(t *testing.T) {
	tg := newTarget(t, nil)
	q := createQueue(t, ct, nil).Name
	createTask(t, ct, q, httpTask(tg.URL))
	if h := tg.waitDeliveries(t, 1, 5*time.Second)[0].header.Get("Authorization"); h != "" {
		t.Errorf("Authorization = %q, want none", h)
	}
}

func TestStatusPage(t *testing.T) {
	s, c := startServer(t, Options{})
	ctx := context.Background()
	q := createQueue(t, c, nil).Name
	if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	createTask(t, c, q, httpTask("http://example.com/"))
	createTask(t, c, q, httpTask("http://example.com/"))
	var got struct{ Queues []QueueStatus }
	getJSON(t, "http://"+s.HTTPAddr()+"/status", &got)
	if len(got.Queues) != 1 || got.Queues[0].Name != q || got.Queues[0].State != "PAUSED" || got.Queues[0].Depth != 2 || got.Queues[0].InFlight != 0 {
		t.Errorf("status = %+v", got)
	}
	resp, err := http.Get("http://" + s.HTTPAddr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), q) || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET / = %s %q", resp.Status, body)
	}
}

func TestMetrics(t *testing.T) {
	s, c := startServer(t, Options{})
	ctx := context.Background()
	tg := newTarget(t, nil)
	paused := createQueue(t, c, nil).Name
	if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: paused}); err != nil {
		t.Fatal(err)
	}
	createTask(t, c, paused, httpTask(tg.URL))
	running := createQueue(t, c, nil).Name
	done := createTask(t, c, running, httpTask(tg.URL))
	eventually(t, 5*time.Second, "the task to complete", func() bool {
		_, err := c.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: done.Name})
		return err != nil
	})
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`tasksemu_queue_depth{queue="` + paused + `"} 1`,
		`tasksemu_queue_paused{queue="` + paused + `"} 1`,
		`tasksemu_queue_depth{queue="` + running + `"} 0`,
		`tasksemu_attempts_total{queue="` + running + `",outcome="2xx"} 1`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

// IssuerURL and SigningKey replace the defaults: tokens carry that issuer and verify with that
// key, and the discovery document (still served on the HTTP port) names it.
func TestIssuerAndKeyOptions(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const iss = "https://tasks.example.internal"
	emu, _ := startServer(t, Options{IssuerURL: iss, SigningKey: key})
	if emu.Issuer() != iss {
		t.Errorf("Issuer() = %q, want %q", emu.Issuer(), iss)
	}
	var disc struct {
		Issuer string `json:"issuer"`
	}
	getJSON(t, "http://"+emu.HTTPAddr()+"/.well-known/openid-configuration", &disc)
	if disc.Issuer != iss {
		t.Errorf("discovery issuer = %q, want %q", disc.Issuer, iss)
	}
	tok, err := emu.issuer.Mint("aud", "sa@example.com", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := oidc.NewIssuer(iss, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Verify(tok, "aud", time.Now()); err != nil {
		t.Errorf("token does not verify with the configured key and issuer: %v", err)
	}
}
