package localenv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/localenv"
	"github.com/spanmart/spanmart/internal/topology"
)

func stack() localenv.Stack {
	ports := map[string]int{}
	for i, s := range topology.Services() {
		ports[s.Name] = 9000 + i
	}
	return localenv.Stack{
		Instance: "projects/spanmart-local/instances/t", SpannerAddr: "127.0.0.1:1", TasksAddr: "127.0.0.1:2",
		TasksHTTP: "http://127.0.0.1:3", PaysimURL: "http://127.0.0.1:4", SMTPAddr: "127.0.0.1:5", LogLevel: "debug",
		AuthURL: "http://127.0.0.1:6",
		URL:     func(n string) string { return "http://svc-" + n },
		Port:    func(n string) int { return ports[n] },
	}
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			m[k+" (twice)"] = v
		}
		m[k] = v
	}
	return m
}

// Every deployable gets the variables it reads on Cloud Run, once each, pointed at the local
// stack: consumers their database, OIDC issuer and audience and the relay; fulfillment the
// warehouse's account; the gateway the sandbox's keys; the relay every source and every
// consumer's URL.
func TestEnvOfEveryDeployable(t *testing.T) {
	st := stack()
	for _, s := range topology.Services() {
		env := envMap(st.Env(s.Name, s))
		for k := range env {
			if strings.HasSuffix(k, " (twice)") {
				t.Errorf("%s: %s set twice", s.Name, strings.TrimSuffix(k, " (twice)"))
			}
		}
		want := map[string]string{
			"K_SERVICE": s.Name, "LOG_LEVEL": "debug", "SPANNER_EMULATOR_HOST": "127.0.0.1:1",
			"GCE_METADATA_HOST": "127.0.0.1:3", "SERVICE_ACCOUNT": localcloud.Account(s.Name),
			"ADMIN_DELEGATE_EMAILS": localcloud.Account(topology.Console),
		}
		operators := localcloud.Operator + "," + localcloud.Account(topology.Console)
		switch {
		case s.Name == topology.Console:
			want["OIDC_AUDIENCE"] = "http://svc-console"
			want["CONSOLE_ALLOWED_EMAILS"] = localcloud.Operator
			want["RELAY_URL"] = "http://svc-relay"
			for _, c := range topology.Consumers() {
				want[c.URLVar] = "http://svc-" + c.Name
			}
		case s.Name == topology.Relay:
			want["OIDC_AUDIENCE"] = "http://svc-relay"
			want["ADMIN_ALLOWED_EMAILS"] = operators
			if n := strings.Count(env["NUDGE_ALLOWED_EMAILS"], ","); n != len(topology.Databases())-1 {
				t.Errorf("relay: NUDGE_ALLOWED_EMAILS %q does not list every service", env["NUDGE_ALLOWED_EMAILS"])
			}
			want["TASKS_LOCATION"] = localcloud.Location
			for _, c := range topology.Consumers() {
				want[c.URLVar] = "http://svc-" + c.Name
			}
			if n := strings.Count(env["RELAY_SOURCES"], ","); n != len(topology.Databases())-1 {
				t.Errorf("relay: RELAY_SOURCES %q does not list every database", env["RELAY_SOURCES"])
			}
		default:
			want["SPANNER_DATABASE"] = st.Database(s.Database)
			want["OIDC_AUDIENCE"] = "http://svc-" + s.Name
			want["OIDC_ISSUER"] = "http://127.0.0.1:3"
			want["RELAY_URL"] = "http://svc-relay"
			want["ADMIN_ALLOWED_EMAILS"] = operators
		}
		switch s.Name {
		case topology.Orders: // its audit reads its peers, as its own account; its customers sign in
			want["FULFILLMENT_URL"], want["GATEWAY_URL"] = "http://svc-fulfillment", "http://svc-gateway-abstraction"
			want["SERVICE_ACCOUNT"] = localcloud.OrdersAccount
			want["CUSTOMER_ISSUER"], want["CUSTOMER_AUDIENCE"] = "http://127.0.0.1:6", localcloud.Project
		case topology.Fulfillment: // the warehouse ships, with its account's ID tokens
			want["WAREHOUSE_ALLOWED_EMAILS"] = localcloud.Warehouse
		case topology.Notifications:
			want["SMTP_ADDR"], want["SMTP_FROM"] = st.SMTPAddr, localenv.MailFrom
			want["SMTP_TIMEOUT"], want["NOTIFICATIONS_RESUME_AFTER"] = "2s", "4s"
		}
		if s.Name == topology.Gateway {
			want["ADMIN_ALLOWED_EMAILS"] = operators + "," + localcloud.OrdersAccount
			want["STRIPE_API_URL"], want["KOMOJU_API_URL"] = "http://127.0.0.1:4", "http://127.0.0.1:4"
			want["STRIPE_WEBHOOK_SECRET"] = localenv.StripeWebhookSecret
		} else if _, ok := env["STRIPE_API_KEY"]; ok {
			t.Errorf("%s is given the gateway's provider keys", s.Name)
		}
		if topology.HasJob(s.Name) { // Cloud Scheduler's jobs call it, as scheduler@ (internal/localscheduler)
			want["ADMIN_ALLOWED_EMAILS"] += "," + localcloud.Account(topology.Scheduler)
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s: %s = %q, want %q", s.Name, k, env[k], v)
			}
		}
	}
	stripe, komoju := st.WebhookURLs()
	if stripe != "http://svc-gateway-abstraction/webhooks/stripe" || komoju != "http://svc-gateway-abstraction/webhooks/komoju" {
		t.Errorf("webhook URLs %s, %s", stripe, komoju)
	}
}

func TestRepoRootAndBuild(t *testing.T) {
	root, err := localenv.RepoRoot() // the test runs in internal/localenv
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "services", "orders")); err != nil {
		t.Fatalf("RepoRoot = %s, which has no services/orders", root)
	}
	dir := t.TempDir()
	if err := localenv.Build(context.Background(), root, dir, []string{"./emulator/paysim/cmd/paysim"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "paysim")); err != nil {
		t.Errorf("no binary after Build: %v", err)
	}
	err = localenv.Build(context.Background(), root, dir, []string{"./no/such/package"}, nil)
	if err == nil || !strings.Contains(err.Error(), "no/such/package") {
		t.Errorf("Build of a missing package: %v, want an error with the compiler's message", err)
	}
}
