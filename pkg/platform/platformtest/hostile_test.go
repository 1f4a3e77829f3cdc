package platformtest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

// reporter is a testing.TB that records what a check reports instead of failing the test; Fatal
// ends the calling goroutine, as testing.T's does.
type reporter struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *reporter) Helper() {}

func (r *reporter) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *reporter) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

func (r *reporter) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *reporter) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// refuse runs platformtest.Refuse against base and returns what it reported.
func refuse(t *testing.T, base string, c platformtest.Hostile) []string {
	r := &reporter{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		platformtest.Refuse(r, base, c)
	}()
	<-done
	return r.errors
}

// answers is a server whose paths answer as a service might: /order refuses in the API's words
// (a body cut short, a GET, anything else), the others answer wrongly, each in one way.
func answers(w http.ResponseWriter, r *http.Request) {
	problem := func(status int, ct, body string) {
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
	const pj = "application/problem+json"
	switch r.URL.Path {
	case "/order":
		switch _, err := io.ReadAll(r.Body); {
		case err != nil:
			problem(400, pj, `{"type":"about:blank","title":"Bad Request","status":400,"detail":"the request body could not be read"}`)
		case r.Method == http.MethodGet:
			problem(404, pj, `{"type":"about:blank","title":"Not Found","status":404,"detail":"order not found"}`)
		case r.Header.Get("Content-Type") != "application/json":
			problem(415, pj, `{"type":"about:blank","title":"Unsupported Media Type","status":415,"detail":"Content-Type must be application/json"}`)
		default:
			problem(400, pj, `{"type":"about:blank","title":"Bad Request","status":400,"detail":"the order is not valid","errors":["lines[0].quantity must be an integer, got a string"]}`)
		}
	case "/crash":
		problem(500, pj, `{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"internal error"}`)
	case "/text":
		problem(400, "text/plain; charset=utf-8", "bad request\n")
	case "/json":
		problem(400, "application/json", `{"type":"about:blank","title":"Bad Request","status":400,"detail":"the order is not valid"}`)
	case "/html":
		problem(400, pj, `<html>bad request</html>`)
	case "/go":
		problem(400, pj, `{"type":"about:blank","title":"Bad Request","status":400,"detail":"json: cannot unmarshal string into Go struct field PlaceOrderRequest.lines of type int64"}`)
	case "/untitled":
		problem(400, pj, `{"type":"about:blank","status":400,"detail":"the order is not valid"}`)
	case "/silent":
		problem(400, pj, `{"type":"about:blank","title":"Bad Request","status":400}`)
	case "/status":
		problem(400, pj, `{"type":"about:blank","title":"Bad Request","status":422,"detail":"the order is not valid"}`)
	}
}

func TestRefuse(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(answers))
	t.Cleanup(ts.Close)
	json := map[string]string{"Content-Type": "application/json"}
	for _, tc := range []struct {
		name string
		c    platformtest.Hostile
		want string // in what Refuse reports; "" wants nothing reported
	}{
		{"the detail in the errors member", platformtest.Hostile{Path: "/order", Header: json, Body: `{"lines":[{"quantity":"1"}]}`, Status: 400, Detail: "lines[0].quantity must be an integer"}, ""},
		{"the detail in the detail", platformtest.Hostile{Path: "/order", Header: json, Body: "{}", Status: 400, Detail: "is not valid"}, ""},
		{"no Content-Type", platformtest.Hostile{Path: "/order", Body: "{}", Status: 415, Detail: "must be application/json"}, ""},
		{"a GET", platformtest.Hostile{Method: http.MethodGet, Path: "/order", Status: 404, Detail: "not found"}, ""},
		{"a body shorter than its Content-Length", platformtest.Hostile{Path: "/order", Header: json, Body: "{}", ShortBy: 10, Status: 400, Detail: "could not be read"}, ""},
		{"a 500", platformtest.Hostile{Path: "/crash", Status: 400}, "500"},
		{"another status", platformtest.Hostile{Path: "/order", Header: json, Body: "{}", Status: 422}, "want 422"},
		{"a case that wants a 5xx", platformtest.Hostile{Path: "/crash", Status: 500}, "a refusal is a 4xx"},
		{"a text answer", platformtest.Hostile{Path: "/text", Status: 400}, "Content-Type"},
		{"JSON, not a problem", platformtest.Hostile{Path: "/json", Status: 400}, "Content-Type"},
		{"a body that is no JSON", platformtest.Hostile{Path: "/html", Status: 400}, "not a problem"},
		{"another detail", platformtest.Hostile{Path: "/order", Header: json, Body: "{}", Status: 400, Detail: "customer_id"}, `mentioning "customer_id"`},
		{"Go words", platformtest.Hostile{Path: "/go", Status: 400, Detail: "cannot unmarshal"}, "speaks Go"},
		{"no title", platformtest.Hostile{Path: "/untitled", Status: 400}, "a title"},
		{"no detail", platformtest.Hostile{Path: "/silent", Status: 400}, "a detail"},
		{"another status in the problem", platformtest.Hostile{Path: "/status", Status: 400}, "want status 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := refuse(t, ts.URL, tc.c)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("Refuse reported %q, want nothing", got)
			case tc.want != "" && !strings.Contains(strings.Join(got, "\n"), tc.want):
				t.Errorf("Refuse reported %q, want a failure mentioning %q", got, tc.want)
			}
		})
	}
}

// Every word of GoTerms is found, and the API's own words are not.
func TestSpeaksGo(t *testing.T) {
	for _, term := range platformtest.GoTerms {
		if got := platformtest.SpeaksGo("the order: " + term + " here"); got != term {
			t.Errorf("SpeaksGo(%q) = %q", term, got)
		}
	}
	for _, text := range []string{"Content-Type must be application/json", "lines[0].quantity must be an integer, got a string", `unknown field "lines[0].SKU"`} {
		if got := platformtest.SpeaksGo(text); got != "" {
			t.Errorf("SpeaksGo(%q) = %q, want none", text, got)
		}
	}
}
