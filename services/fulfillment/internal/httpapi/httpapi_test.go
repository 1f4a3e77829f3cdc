package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/spannertest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/app"
	ft "github.com/spanmart/spanmart/services/fulfillment/internal/fulfillmenttest"
	"github.com/spanmart/spanmart/services/fulfillment/internal/httpapi"
	"github.com/spanmart/spanmart/services/fulfillment/internal/inventory"
	"github.com/spanmart/spanmart/services/fulfillment/internal/store"
)

var env *spannertest.Env

// The service's URL (the audience of its ID tokens) and the accounts its warehouse's actions take.
const (
	audience  = "http://fulfillment.test"
	warehouse = "warehouse@spanmart-test.iam.gserviceaccount.com"
	operator  = "oncall@spanmart-test.iam.gserviceaccount.com"
)

// idp signs the tests' ID tokens and serves its discovery document and JWKS over HTTP, as the
// Tasks emulator does for the local stacks (Google in production).
var idp struct {
	*oidc.Issuer
	url string
}

func TestMain(m *testing.M) {
	hs := httptest.NewUnstartedServer(nil)
	issuer, err := oidc.NewIssuer("http://"+hs.Listener.Addr().String(), nil)
	if err != nil {
		log.Fatal(err)
	}
	hs.Config.Handler = issuer.Handler()
	hs.Start()
	idp.Issuer, idp.url = issuer, hs.URL
	code := spannertest.Main(m, &env)
	hs.Close()
	os.Exit(code)
}

// token returns an ID token of account for audience, minted now.
func token(t *testing.T, audience, account string) string {
	t.Helper()
	tok, err := idp.Mint(audience, account, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// warehouses verifies the ID tokens of the warehouse's actions as run.go does: the warehouse's
// account and the operator's, for the service's URL.
func warehouses(t *testing.T) *outboxlib.Verifier {
	t.Helper()
	v, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{Issuer: idp.url, Audiences: []string{audience}, AllowedEmails: []string{warehouse, operator}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newServer(t *testing.T, client *spanner.Client) *platform.Server {
	t.Helper()
	srv := platform.NewServer(platform.ServerOptions{Service: "fulfillment", Version: "test", ErrorMapper: httpapi.ErrorMapper})
	httpapi.Register(srv.Echo, app.New(store.New(client), nil, nil), warehouses(t))
	return srv
}

// serve starts the API on a real HTTP server over a fresh database with A1 (5 on hand) and B2 (3
// on hand), order o-held holding 2 A1 and 1 B2 and order o-rejected rejected. It returns the
// server's URL and the service behind it.
func serve(t *testing.T) (string, *spanner.Client, *app.Service) {
	t.Helper()
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	ft.Seed(t, client, map[string][2]int64{"A1": {5, 0}, "B2": {3, 0}})
	svc := app.New(store.New(client), nil, nil)
	for id, lines := range map[string][]inventory.Line{
		"o-held":     {{SKU: "B2", Quantity: 1}, {SKU: "A1", Quantity: 2}},
		"o-rejected": {{SKU: "A1", Quantity: 9}},
	} {
		ft.Run(t, client, func(ctx context.Context, txn app.Txn) (app.Outcome, error) { return svc.Reserve(ctx, txn, id, lines) })
	}
	hs := httptest.NewServer(newServer(t, client).Echo)
	t.Cleanup(hs.Close)
	return hs.URL, client, svc
}

// do sends a request (a JSON body unless it is "") with the given Authorization header (none if
// "") and returns the status, the content type and the decoded JSON object of the answer.
func do(t *testing.T, method, url, authorization, body string) (int, string, map[string]any) {
	t.Helper()
	status, header, m := doHeader(t, method, url, authorization, body)
	return status, header.Get("Content-Type"), m
}

// doHeader is do, returning every header of the answer.
func doHeader(t *testing.T, method, url, authorization, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %v: %s", method, url, err, data)
	}
	return resp.StatusCode, resp.Header, m
}

func get(t *testing.T, url string) (int, string, map[string]any) {
	t.Helper()
	return do(t, http.MethodGet, url, "", "")
}

func js(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReads(t *testing.T) {
	url, _, _ := serve(t)
	for _, tt := range []struct {
		path string
		want string
	}{
		{"/v1/inventory", `{"items":[
			{"sku":"A1","on_hand":5,"reserved":2,"available":3},
			{"sku":"B2","on_hand":3,"reserved":1,"available":2}]}`},
		{"/v1/inventory/A1", `{"sku":"A1","on_hand":5,"reserved":2,"available":3}`},
		{"/v1/reservations/o-held", `{"order_id":"o-held","status":"HELD","version":1,"lines":[
			{"sku":"A1","quantity":2,"status":"HELD"},{"sku":"B2","quantity":1,"status":"HELD"}]}`},
		{"/v1/reservations/o-rejected", `{"order_id":"o-rejected","status":"REJECTED","version":1,"lines":[]}`},
	} {
		t.Run(tt.path, func(t *testing.T) {
			status, ct, got := get(t, url+tt.path)
			if status != http.StatusOK || !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("GET %s = %d %s %v", tt.path, status, ct, got)
			}
			for _, k := range []string{"created_at", "updated_at"} {
				if v, ok := got[k]; ok {
					if ts, err := time.Parse(time.RFC3339Nano, v.(string)); err != nil || ts.IsZero() {
						t.Errorf("%s = %v, want an RFC 3339 timestamp", k, v)
					}
					delete(got, k)
				}
			}
			if diff := cmp.Diff(js(t, tt.want), got); diff != "" {
				t.Errorf("GET %s (-want +got):\n%s", tt.path, diff)
			}
		})
	}
}

func TestNotFound(t *testing.T) {
	url, _, _ := serve(t)
	for _, path := range []string{"/v1/inventory/NOPE", "/v1/reservations/o-unknown", "/v1/reservations/" + strings.Repeat("x", 37)} {
		t.Run(path, func(t *testing.T) {
			status, ct, got := get(t, url+path)
			if status != http.StatusNotFound || ct != platform.ContentTypeProblem {
				t.Fatalf("GET %s = %d %s, want 404 %s", path, status, ct, platform.ContentTypeProblem)
			}
			if got["status"] != float64(404) || got["title"] != "Not Found" || got["instance"] != path {
				t.Errorf("problem = %v", got)
			}
		})
	}
}

func TestEmptyInventory(t *testing.T) {
	client, _ := env.NewDatabase(t, dbschema.Fulfillment)
	hs := httptest.NewServer(newServer(t, client).Echo)
	defer hs.Close()
	status, _, got := get(t, hs.URL+"/v1/inventory")
	if status != http.StatusOK || cmp.Diff(js(t, `{"items":[]}`), got) != "" {
		t.Errorf("GET /v1/inventory = %d %v, want 200 with no items", status, got)
	}
}

// TestOpenAPIAgreesWithRouter checks that api/openapi.yaml documents exactly the routes Register
// adds (echo's :param is OpenAPI's {param}) and that every path parameter is declared.
func TestOpenAPIAgreesWithRouter(t *testing.T) {
	data, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string `yaml:"openapi"`
		Paths   map[string]map[string]struct {
			OperationID string `yaml:"operationId"`
			Parameters  []struct {
				Name string `yaml:"name"`
				In   string `yaml:"in"`
			} `yaml:"parameters"`
			Responses map[string]any `yaml:"responses"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	var documented []string
	param := regexp.MustCompile(`\{([^}]+)\}`)
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
			if op.OperationID == "" || op.Responses["200"] == nil {
				t.Errorf("%s %s: needs an operationId and a 200 response", method, path)
			}
			declared := map[string]bool{}
			for _, p := range op.Parameters {
				if p.In == "path" {
					declared[p.Name] = true
				}
			}
			for _, m := range param.FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					t.Errorf("%s %s: path parameter %s is not declared", method, path, m[1])
				}
			}
		}
	}

	e := platform.NewServer(platform.ServerOptions{}).Echo
	operational := map[string]bool{}
	for _, r := range e.Routes() {
		operational[r.Method+" "+r.Path] = true
	}
	httpapi.Register(e, nil, nil)
	var routed []string
	colon := regexp.MustCompile(`:([A-Za-z0-9_]+)`)
	for _, r := range e.Routes() {
		if key := r.Method + " " + r.Path; !operational[key] {
			routed = append(routed, r.Method+" "+colon.ReplaceAllString(r.Path, "{$1}"))
		}
	}
	sort.Strings(documented)
	sort.Strings(routed)
	if diff := cmp.Diff(documented, routed); diff != "" {
		t.Errorf("api/openapi.yaml (-) and the router (+) disagree:\n%s", diff)
	}
}
