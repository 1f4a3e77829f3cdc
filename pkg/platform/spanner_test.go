package platform_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

func TestNewSpannerClientRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "orders", "projects/p/instances/inst/databases/Bad"} {
		if c, err := platform.NewSpannerClient(context.Background(), name); err == nil {
			c.Close()
			t.Errorf("NewSpannerClient(%q) succeeded, want an error", name)
		}
	}
}

// readyz serves a server with the given checks and returns GET /readyz.
func readyz(t *testing.T, checks ...platform.Check) response {
	t.Helper()
	ts := startServer(t, platform.ServerOptions{}, nil)
	for _, c := range checks {
		ts.srv.AddCheck(c)
	}
	return get(t, ts.url+"/readyz", nil)
}

func TestReadyzLiveDatabase(t *testing.T) {
	_, name := env.NewDatabase(t, dbschema.Orders)
	client, err := platform.NewSpannerClient(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	resp := readyz(t, platform.SpannerCheck("spanner", client))
	want := map[string]any{"status": "ok", "checks": map[string]any{"spanner": "ok"}}
	if diff := cmp.Diff(want, resp.json(t)); resp.status != http.StatusOK || diff != "" {
		t.Errorf("GET /readyz = %d, body mismatch (-want +got):\n%s", resp.status, diff)
	}
}

func TestReadyzMissingDatabase(t *testing.T) {
	_, live := env.NewDatabase(t, dbschema.Orders)
	liveClient, err := platform.NewSpannerClient(context.Background(), live)
	if err != nil {
		t.Fatal(err)
	}
	defer liveClient.Close()
	missing := spannertest.Instance + "/databases/nosuchdb"
	client, err := platform.NewSpannerClient(context.Background(), missing)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	resp := readyz(t, platform.SpannerCheck("spanner orders", liveClient), platform.SpannerCheck("spanner missing", client))
	if resp.status != http.StatusServiceUnavailable {
		t.Fatalf("status = %d, want 503", resp.status)
	}
	if ct := resp.header.Get("Content-Type"); ct != platform.ContentTypeProblem {
		t.Errorf("Content-Type = %q", ct)
	}
	body := resp.json(t)
	if body["detail"] != "not ready: spanner missing" {
		t.Errorf("detail = %v, want it to name only the failed dependency", body["detail"])
	}
	checks, _ := body["checks"].(map[string]any)
	if checks["spanner orders"] != "ok" || !strings.Contains(checks["spanner missing"].(string), "NotFound") {
		t.Errorf("checks = %v, want orders ok and missing NotFound", checks)
	}
}

func TestReadyzClosedClient(t *testing.T) {
	_, name := env.NewDatabase(t, dbschema.Fulfillment)
	client, err := platform.NewSpannerClient(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	client.Close()
	resp := readyz(t, platform.SpannerCheck("spanner", client))
	if resp.status != http.StatusServiceUnavailable || resp.json(t)["detail"] != "not ready: spanner" {
		t.Errorf("GET /readyz = %d %s, want 503 naming spanner", resp.status, resp.body)
	}
}
