package httpapi_test

import (
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"

	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/httpapi"
)

// TestOpenAPIMatchesRoutes: every public route is in api/openapi.yaml and every operation of the
// document is a route. Operational endpoints (/healthz, /metrics, ...) and POST /events (the
// CloudEvents consumer, not public) are registered elsewhere and not part of the document.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	data, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                               `yaml:"openapi"`
		Paths   map[string]map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	methods := map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true}
	var documented []string
	for path, ops := range doc.Paths {
		for m := range ops {
			if methods[m] {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}

	e := echo.New()
	httpapi.Register(e, app.New(nil, nil))
	param := regexp.MustCompile(`:(\w+)`)
	var routes []string
	for _, r := range e.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		routes = append(routes, r.Method+" "+param.ReplaceAllString(r.Path, "{$1}"))
	}
	sort.Strings(documented)
	sort.Strings(routes)
	if diff := cmp.Diff(documented, routes); diff != "" {
		t.Errorf("openapi.yaml (-) and the router (+) differ:\n%s", diff)
	}
	if len(routes) == 0 || !strings.Contains(strings.Join(routes, ","), http.MethodPost+" /v1/orders") {
		t.Errorf("routes = %v", routes)
	}
}
