package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/services/console/internal/auth"
	"github.com/spanmart/spanmart/services/console/internal/consoletest"
	"github.com/spanmart/spanmart/services/console/internal/web"
)

// assertion is a fresh IAP assertion of email, as IAP adds to a request of that user.
func (f *fixture) assertion(t *testing.T, email string) string {
	t.Helper()
	return consoletest.Assertion(t, f.iap, authemu.IAPClaims{Email: email})
}

// doIAP sends a request as IAP passes it on: with the assertion (none if ""), the cookies, and the
// Authorization header bearer (none if "").
func (f *fixture) doIAP(t *testing.T, method, path, assertion, bearer string, cookies []*http.Cookie, form url.Values) answer {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, f.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if assertion != "" {
		req.Header.Set(auth.HeaderIAPAssertion, assertion)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for _, ck := range cookies {
		req.AddCookie(ck)
	}
	resp, err := f.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// TestPagesBehindIAP: behind Identity-Aware Proxy every page and the API answer an operator's
// request that carries IAP's assertion, name the operator on the page and to every service called
// (X-Spanmart-On-Behalf-Of, with the console's own token); a request without the assertion (around
// the proxy), with the assertion of another audience, with only the ID-token sign-in, or of a
// non-operator is refused (401/403, HTML for pages, problem+json for the API, never a 500) and
// reaches no service; /login sends a signed-in operator to /.
func TestPagesBehindIAP(t *testing.T) {
	f := newIAPFixture(t)
	idToken := f.issuer.Token(t, f.url, consoletest.Operator)
	otherAudience := consoletest.Assertion(t, f.iap, authemu.IAPClaims{Email: consoletest.Operator, Audience: "/projects/123456789012/global/backendServices/1"})
	for _, tc := range []struct {
		name, path, assertion, bearer string
		status                        int
		contentType                   string
		contains                      string
	}{
		{"page around the proxy", "/", "", "", 401, "text/html", "Identity-Aware Proxy"},
		{"page around the proxy with the operator's ID token", "/failed", "", idToken, 401, "text/html", "no Identity-Aware Proxy assertion"},
		{"page with another audience's assertion", "/stuck", otherAudience, "", 401, "text/html", "not valid for this console"},
		{"page of a non-operator", "/orders", f.assertion(t, consoletest.Stranger), "", 403, "text/html", "not an operator of the console"},
		{"API around the proxy", "/api/overview", "", "", 401, "application/problem+json", `"status":401`},
		{"API of a non-operator", "/api/overview", f.assertion(t, consoletest.Stranger), "", 403, "application/problem+json", `"status":403`},
		{"sign-in around the proxy", "/login?token=" + url.QueryEscape(idToken), "", "", 401, "text/html", "Identity-Aware Proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.doIAP(t, http.MethodGet, tc.path, tc.assertion, tc.bearer, nil, nil)
			if a.status != tc.status || !strings.HasPrefix(a.header.Get("Content-Type"), tc.contentType) || !strings.Contains(a.body, tc.contains) {
				t.Errorf("GET %s = %d %s %q, want %d %s containing %q", tc.path, a.status, a.header.Get("Content-Type"), a.body, tc.status, tc.contentType, tc.contains)
			}
			if strings.Contains(a.body, "/login?token=") {
				t.Errorf("behind IAP the refusal offers the ID-token sign-in: %q", a.body)
			}
		})
	}
	if got := f.stack.Requests(""); len(got) != 0 {
		t.Errorf("refused requests reached the services: %+v", got)
	}

	for _, path := range []string{"/", "/api/overview", "/failed", "/orders", "/orders/" + consoletest.OrderID, "/stuck"} {
		a := f.doIAP(t, http.MethodGet, path, f.assertion(t, consoletest.Operator), "", nil, nil)
		if a.status != 200 || !strings.Contains(a.body, consoletest.Operator) && path != "/api/overview" {
			t.Errorf("GET %s as the operator through IAP = %d %q", path, a.status, a.body)
		}
	}
	reqs := f.stack.Requests("")
	if len(reqs) == 0 {
		t.Fatal("the pages called no service")
	}
	for _, r := range reqs {
		if got := r.Header.Get(adminclient.HeaderOnBehalfOf); got != consoletest.Operator {
			t.Errorf("%s %s%s: %s = %q, want %s", r.Method, r.Service, r.Path, adminclient.HeaderOnBehalfOf, got, consoletest.Operator)
		}
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") || r.Header.Get(auth.HeaderIAPAssertion) != "" {
			t.Errorf("%s %s%s: the console's own bearer, and never IAP's assertion, should reach a service: %v", r.Method, r.Service, r.Path, r.Header)
		}
	}

	a := f.doIAP(t, http.MethodGet, auth.PathLogin, f.assertion(t, consoletest.Operator), "", nil, nil)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/" {
		t.Errorf("GET /login through IAP = %d to %q, want 303 to /", a.status, a.header.Get("Location"))
	}
}

// TestReplayBehindIAP: a replay through IAP carries the CSRF token of the operator's pages, keyed
// with the console's cookie (the assertion of the POST is not that of the page), reaches the
// service on behalf of the operator, and without the cookie nothing is sent.
func TestReplayBehindIAP(t *testing.T) {
	f := newIAPFixture(t)
	page := f.doIAP(t, http.MethodGet, web.PathFailed, f.assertion(t, consoletest.Operator), "", nil, nil)
	cookies := (&http.Response{Header: page.header}).Cookies()
	if page.status != 200 || len(cookies) != 1 || cookies[0].Name != auth.CSRFCookieName {
		t.Fatalf("GET /failed = %d, cookies %v", page.status, cookies)
	}
	csrf := csrfOf(t, page.body)
	form := url.Values{"target": {"deadletter/fulfillment/" + consoletest.StockDeadLetter1}, "reason": {"catalog fixed"}, auth.FieldCSRF: {csrf}}
	later := consoletest.Assertion(t, f.iap, authemu.IAPClaims{Email: consoletest.Operator, IssuedAt: time.Now().Add(-time.Second)})

	if a := f.doIAP(t, http.MethodPost, web.PathReplay, later, "", nil, form); a.status != http.StatusForbidden {
		t.Errorf("POST without the CSRF cookie = %d %q, want 403", a.status, a.body)
	}
	if got := f.servicePosts(); len(got) != 0 {
		t.Fatalf("a refused replay reached a service: %+v", got)
	}
	if a := f.doIAP(t, http.MethodPost, web.PathReplay, "", "", cookies, form); a.status != http.StatusUnauthorized {
		t.Errorf("POST around the proxy = %d %q, want 401", a.status, a.body)
	}
	a := f.doIAP(t, http.MethodPost, web.PathReplay, later, "", cookies, form)
	if a.status != 200 || !strings.Contains(a.body, "1 replayed") {
		t.Fatalf("POST through IAP with the page's CSRF token = %d %q", a.status, a.body)
	}
	posts := f.servicePosts()
	if len(posts) != 1 || posts[0].Header.Get(adminclient.HeaderOnBehalfOf) != consoletest.Operator {
		t.Errorf("replays sent: %+v, want one on behalf of %s", posts, consoletest.Operator)
	}
}
