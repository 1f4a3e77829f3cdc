package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/adminclient/adminclienttest"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/console/internal/auth"
	"github.com/spanmart/spanmart/services/console/internal/consoletest"
	"github.com/spanmart/spanmart/services/console/internal/web"
)

// fixture is a console on httptest in front of adminclienttest's fakes, whose tokens are
// adminclienttest.Tokens (so a request's bearer says which audience it was minted for).
type fixture struct {
	url    string
	issuer *consoletest.Issuer
	iap    *authemu.Server // behind Identity-Aware Proxy: IAP's stand-in (newIAPFixture)
	stack  *adminclienttest.Stack
	sc     *consoletest.Scenario
	logs   *platformtest.Logs
	http   *http.Client
}

// newFixture is the console whose operators sign in with an ID token.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	return startFixture(t, &fixture{issuer: consoletest.NewIssuer(t)}, func(f *fixture) auth.Config {
		return auth.Config{Issuer: f.issuer.URL, Audience: f.url, Allowed: []string{consoletest.Operator}}
	})
}

// newIAPFixture is the console behind Identity-Aware Proxy, whose assertions authemu signs.
func newIAPFixture(t *testing.T) *fixture {
	t.Helper()
	return startFixture(t, &fixture{issuer: consoletest.NewIssuer(t), iap: consoletest.StartIAP(t)}, func(f *fixture) auth.Config {
		return auth.Config{IAP: consoletest.IAPConfig(f.iap), Allowed: []string{consoletest.Operator}}
	})
}

func startFixture(t *testing.T, f *fixture, authConfig func(*fixture) auth.Config) *fixture {
	t.Helper()
	f.stack = adminclienttest.Start(t)
	f.sc = consoletest.Install(f.stack, time.Now())
	ln := platformtest.Listen(t)
	f.url = "http://" + ln.Addr().String()
	authn, err := auth.New(authConfig(f))
	if err != nil {
		t.Fatal(err)
	}
	client, err := adminclient.New(adminclient.Config{URLs: f.stack.URLs(), Tokens: &adminclienttest.Tokens{}})
	if err != nil {
		t.Fatal(err)
	}
	console, err := web.New(web.Config{Client: client, Auth: authn, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	logger, logs := platformtest.NewLogger(t, "console")
	f.logs = logs
	srv := platform.NewServer(platform.ServerOptions{Service: "console", Logger: logger})
	srv.Echo.Pre(auth.HideLoginToken)
	console.Register(srv.Echo)
	hs := httptest.NewUnstartedServer(srv.Echo)
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)
	f.http = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return f
}

// operator is a valid operator's token for the console.
func (f *fixture) operator(t *testing.T) string {
	return f.issuer.Token(t, f.url, consoletest.Operator)
}

type answer struct {
	status int
	header http.Header
	body   string
}

// do sends a request; bearer and cookie may be "".
func (f *fixture) do(t *testing.T, method, path, bearer, cookie string, form url.Values) answer {
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
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: cookie})
	}
	resp, err := f.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// servicePosts are the POSTs the fakes received (every replay).
func (f *fixture) servicePosts() []adminclienttest.Request {
	var out []adminclienttest.Request
	for _, r := range f.stack.Requests("") {
		if r.Method == http.MethodPost {
			out = append(out, r)
		}
	}
	return out
}

func TestPagesAndAPIRequireAnOperator(t *testing.T) {
	f := newFixture(t)
	other := f.issuer.Token(t, "https://another.example.com", consoletest.Operator)
	stranger := f.issuer.Token(t, f.url, consoletest.Stranger)
	for _, tc := range []struct {
		name, path, bearer string
		status             int
		contentType        string
		contains           string
	}{
		{"page without a token", "/", "", 401, "text/html", "/login?token="},
		{"page with a token for another audience", "/failed", other, 401, "text/html", "sign in again"},
		{"page with a garbled token", "/stuck", "not-a-jwt", 401, "text/html", "Sign in"},
		{"page of a non-operator", "/orders", stranger, 403, "text/html", "not an operator of the console"},
		{"API without a token", "/api/overview", "", 401, "application/problem+json", `"status":401`},
		{"API of a non-operator", "/api/overview", stranger, 403, "application/problem+json", `"status":403`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.do(t, http.MethodGet, tc.path, tc.bearer, "", nil)
			if a.status != tc.status || !strings.HasPrefix(a.header.Get("Content-Type"), tc.contentType) || !strings.Contains(a.body, tc.contains) {
				t.Errorf("GET %s = %d %s %q, want %d %s containing %q", tc.path, a.status, a.header.Get("Content-Type"), a.body, tc.status, tc.contentType, tc.contains)
			}
		})
	}
	if got := f.stack.Requests(""); len(got) != 0 {
		t.Errorf("refused requests reached the services: %+v", got)
	}
	if a := f.do(t, http.MethodGet, "/", f.operator(t), "", nil); a.status != 200 || !strings.Contains(a.body, consoletest.Operator) {
		t.Errorf("GET / as the operator = %d %q", a.status, a.body)
	}
}

func TestLoginSetsTheSessionAndKeepsTheTokenOutOfTheLog(t *testing.T) {
	f := newFixture(t)
	tok := f.operator(t)
	a := f.do(t, http.MethodGet, "/login?token="+url.QueryEscape(tok), "", "", nil)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/" {
		t.Fatalf("GET /login = %d, Location %q; want 303 to /", a.status, a.header.Get("Location"))
	}
	cookies := (&http.Response{Header: a.header}).Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies = %v", cookies)
	}
	ck := cookies[0]
	if ck.Name != auth.CookieName || ck.Value != tok || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Path != "/" {
		t.Errorf("cookie = %+v; want the token, HttpOnly, SameSite=Strict, not Secure (http), Path=/", ck)
	}
	if ck.Expires.IsZero() || ck.Expires.Before(time.Now()) {
		t.Errorf("cookie expires %v, want the token's exp", ck.Expires)
	}
	if a := f.do(t, http.MethodGet, "/", "", tok, nil); a.status != 200 || !strings.Contains(a.body, consoletest.Operator) {
		t.Errorf("GET / with the session = %d", a.status)
	}
	for _, e := range f.logs.Entries(t) {
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), tok) {
			t.Errorf("the token is in a log line: %s", b)
		}
	}
	platformtest.Eventually(t, "the login's access log line", func() bool {
		for _, e := range f.logs.Entries(t) {
			if e["route"] == auth.PathLogin {
				return true
			}
		}
		return false
	})

	for _, tc := range []struct{ name, query string }{
		{"no token", "/login"},
		{"a stranger's token", "/login?token=" + f.issuer.Token(t, f.url, consoletest.Stranger)},
		{"an expired-looking garble", "/login?token=abc.def.ghi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.do(t, http.MethodGet, tc.query, "", "", nil)
			if a.status != 401 && a.status != 403 {
				t.Errorf("GET %s = %d, want 401 or 403", tc.query, a.status)
			}
			if c := a.header.Get("Set-Cookie"); c != "" {
				t.Errorf("a refused login set a cookie: %s", c)
			}
		})
	}
}

// csrf is the CSRF token of the bearer session tok, from a page.
func (f *fixture) csrf(t *testing.T, tok string) string {
	t.Helper()
	return csrfOf(t, f.do(t, http.MethodGet, "/failed", tok, "", nil).body)
}

var reCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, html string) string {
	t.Helper()
	m := reCSRF.FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no CSRF token in the page")
	}
	return m[1]
}

func TestReplayNeedsTheSessionsCSRFToken(t *testing.T) {
	f := newFixture(t)
	tok := f.operator(t)
	page := f.do(t, http.MethodGet, "/failed", "", tok, nil)
	csrf := csrfOf(t, page.body)
	otherSession := csrfOf(t, f.do(t, http.MethodGet, "/failed", "", f.issuer.TokenAt(t, f.url, consoletest.Operator, time.Now().Add(-time.Minute)), nil).body)
	if otherSession == csrf {
		t.Fatal("two sessions have one CSRF token")
	}
	form := func(csrf string) url.Values {
		v := url.Values{"target": {"deadletter/fulfillment/" + consoletest.StockDeadLetter1}, "reason": {"catalog fixed"}}
		if csrf != "" {
			v.Set(auth.FieldCSRF, csrf)
		}
		return v
	}
	for _, tc := range []struct{ name, csrf string }{
		{"none", ""},
		{"a forged one", "AAAA"},
		{"another session's", otherSession},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.do(t, http.MethodPost, web.PathReplay, "", tok, form(tc.csrf))
			if a.status != http.StatusForbidden || !strings.Contains(a.body, "CSRF") {
				t.Errorf("POST without the right CSRF token = %d %q, want 403", a.status, a.body)
			}
		})
	}
	if got := f.servicePosts(); len(got) != 0 {
		t.Fatalf("a refused replay reached a service: %+v", got)
	}
	if a := f.do(t, http.MethodPost, web.PathReplay, "", tok, form(csrf)); a.status != 200 || !strings.Contains(a.body, "1 replayed") {
		t.Fatalf("POST with the session's CSRF token = %d %q", a.status, a.body)
	}
	if got := len(f.servicePosts()); got != 1 {
		t.Errorf("%d replays sent, want 1", got)
	}
	// A bearer token is a session like the cookie (a proxy in front of the console may add the
	// header to whatever the browser sends): its forms carry its CSRF token too.
	if a := f.do(t, http.MethodPost, web.PathReplay, tok, "", form("")); a.status != http.StatusForbidden {
		t.Errorf("POST with a bearer token and no CSRF token = %d %q, want 403", a.status, a.body)
	}
	if a := f.do(t, http.MethodPost, web.PathReplay, tok, "", form(f.csrf(t, tok))); a.status != 200 {
		t.Errorf("POST with a bearer token and its CSRF token = %d %q", a.status, a.body)
	}
}

func TestReplayRequiresAReason(t *testing.T) {
	f := newFixture(t)
	tok := f.operator(t)
	csrf := f.csrf(t, tok)
	for _, reason := range []string{"", "   ", "\t\n"} {
		a := f.do(t, http.MethodPost, web.PathReplay, tok, "", url.Values{
			"target": {"deadletter/fulfillment/" + consoletest.StockDeadLetter1, "outbox/orders/" + consoletest.QuarantinedID}, "reason": {reason},
			auth.FieldCSRF: {csrf},
		})
		if a.status != http.StatusBadRequest || !strings.Contains(a.body, "A reason is required") {
			t.Errorf("reason %q: %d %q, want 400 saying a reason is required", reason, a.status, a.body)
		}
	}
	for _, target := range []string{"", "deadletter/relay/x", "outbox/console/x", "outbox/orders/", "delete/orders/x"} {
		a := f.do(t, http.MethodPost, web.PathReplay, tok, "", url.Values{"target": {target}, "reason": {"r"}, auth.FieldCSRF: {csrf}})
		if a.status != http.StatusBadRequest {
			t.Errorf("target %q: %d, want 400", target, a.status)
		}
	}
	if got := f.servicePosts(); len(got) != 0 {
		t.Errorf("refused replays reached a service: %+v", got)
	}
}

func TestReplayIsTheConsolesOnBehalfOfTheOperator(t *testing.T) {
	f := newFixture(t)
	tok := f.operator(t)
	a := f.do(t, http.MethodPost, web.PathReplay, tok, "", url.Values{"reason": {"catalog fixed in #42"}, auth.FieldCSRF: {f.csrf(t, tok)}, "target": {
		"deadletter/fulfillment/" + consoletest.StockDeadLetter1,
		"deadletter/fulfillment/" + consoletest.StockDeadLetter2,
		"outbox/orders/" + consoletest.QuarantinedID,
		"deadletter/notifications/" + consoletest.UnknownTypeDeadLetter,
	}})
	if a.status != 200 {
		t.Fatalf("replay = %d %q", a.status, a.body)
	}
	for _, want := range []string{"3 replayed", "1 refused", "applied", "no handler"} {
		if !strings.Contains(a.body, want) {
			t.Errorf("the result page lacks %q", want)
		}
	}
	type sent struct{ Service, Path, Body, Bearer, OnBehalfOf string }
	var got []sent
	for _, r := range f.servicePosts() {
		got = append(got, sent{r.Service, r.Path, r.Body, r.Header.Get("Authorization"), r.Header.Get(adminclient.HeaderOnBehalfOf)})
	}
	body := `{"reason":"catalog fixed in #42"}`
	bearer := func(svc string) string { return "Bearer " + adminclienttest.TokenPrefix + f.stack.URL(svc) }
	want := []sent{
		{topology.Fulfillment, "/admin/deadletters/" + consoletest.StockDeadLetter1 + "/replay", body, bearer(topology.Fulfillment), consoletest.Operator},
		{topology.Fulfillment, "/admin/deadletters/" + consoletest.StockDeadLetter2 + "/replay", body, bearer(topology.Fulfillment), consoletest.Operator},
		{topology.Relay, "/v1/outbox/orders/events/" + consoletest.QuarantinedID + "/replay", body, bearer(topology.Relay), consoletest.Operator},
		{topology.Notifications, "/admin/deadletters/" + consoletest.UnknownTypeDeadLetter + "/replay", body, bearer(topology.Notifications), consoletest.Operator},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replays sent (-want +got):\n%s", diff)
	}
}

func TestGETsChangeNothing(t *testing.T) {
	f := newFixture(t)
	tok := f.operator(t)
	for _, p := range []string{"/", "/api/overview", "/failed", "/orders", "/orders?q=" + consoletest.OrderID, "/orders/" + consoletest.OrderID, "/stuck"} {
		if a := f.do(t, http.MethodGet, p, tok, "", nil); a.status != 200 && a.status != http.StatusSeeOther {
			t.Errorf("GET %s = %d", p, a.status)
		}
	}
	if got := f.servicePosts(); len(got) != 0 {
		t.Errorf("GETs sent POSTs: %+v", got)
	}
	for _, r := range f.stack.Requests("") {
		if r.Header.Get(adminclient.HeaderOnBehalfOf) != consoletest.Operator {
			t.Errorf("%s %s %s without the operator in %s", r.Service, r.Method, r.Path, adminclient.HeaderOnBehalfOf)
		}
	}
}

func TestAServiceThatDoesNotAnswerIsShownAsSuch(t *testing.T) {
	f := newFixture(t)
	tok := f.operator(t)
	f.stack.Down(topology.Fulfillment)
	f.stack.Refuse(topology.Relay, "GET /v1/outbox/quarantined", http.StatusForbidden)
	f.stack.Reply(topology.Orders, "GET /admin/reconciliation", http.StatusInternalServerError, adminclienttest.Problem(500, "", ""))
	for _, tc := range []struct {
		path     string
		contains []string
	}{
		{"/", []string{`data-consumer="fulfillment"`, "did not answer", "connection refused"}},
		{"/failed", []string{"fulfillment</strong> did not give its dead letters", "relay</strong> did not give its quarantined events: answered 403 Forbidden", consoletest.UnknownTypeDeadLetter}},
		{"/orders/" + consoletest.OrderID, []string{"fulfillment</strong> did not give shipments", "order.created"}},
		{"/stuck", []string{"orders</strong> did not give the reconciliation: answered 500", consoletest.StuckOrderID}},
	} {
		a := f.do(t, http.MethodGet, tc.path, tok, "", nil)
		if a.status != 200 {
			t.Errorf("GET %s = %d, want 200 with the gaps shown", tc.path, a.status)
		}
		for _, want := range tc.contains {
			if !strings.Contains(a.body, want) {
				t.Errorf("GET %s lacks %q", tc.path, want)
			}
		}
	}
}

func TestOrderSearch(t *testing.T) {
	f := newFixture(t)
	tok := f.operator(t)
	if a := f.do(t, http.MethodGet, "/orders?q="+consoletest.OrderID, tok, "", nil); a.status != http.StatusSeeOther || a.header.Get("Location") != "/orders/"+consoletest.OrderID {
		t.Errorf("search by order id = %d to %q", a.status, a.header.Get("Location"))
	}
	a := f.do(t, http.MethodGet, "/orders?q="+consoletest.StuckCustomerID, tok, "", nil)
	if a.status != 200 || !strings.Contains(a.body, `href="/orders/`+consoletest.StuckOrderID+`"`) || !strings.Contains(a.body, "No Spanmart API lists a customer") {
		t.Errorf("search by customer id = %d %q", a.status, a.body)
	}
	if a := f.do(t, http.MethodGet, "/orders?q=nothing-like-it", tok, "", nil); a.status != 200 || !strings.Contains(a.body, `id="not-found"`) {
		t.Errorf("search for nothing = %d %q", a.status, a.body)
	}
	if a := f.do(t, http.MethodGet, "/orders/nothing-like-it", tok, "", nil); a.status != 404 || !strings.Contains(a.body, "no order nothing-like-it") {
		t.Errorf("trace of an unknown order = %d %q", a.status, a.body)
	}
}

func TestFailedGroupsAndEscapesPayloads(t *testing.T) {
	f := newFixture(t)
	a := f.do(t, http.MethodGet, "/failed", f.operator(t), "", nil)
	if strings.Contains(a.body, "<script>alert(1)</script>") || !strings.Contains(a.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the payload is not escaped")
	}
	groups := regexp.MustCompile(`(?s)<section class="card group".*?</section>`).FindAllString(a.body, -1)
	if len(groups) != 3 {
		t.Fatalf("%d groups, want 3", len(groups))
	}
	// The biggest group first: fulfillment's two dead letters, whose errors differ only in ids and numbers.
	for _, want := range []string{`<span class="pill bad">2</span>`, consoletest.StockDeadLetter1, consoletest.StockDeadLetter2,
		`reserve order &lt;id&gt;: sku &#34;TEE-M&#34; unknown to inventory (catalog version &lt;n&gt;)`} {
		if !strings.Contains(groups[0], want) {
			t.Errorf("the first group lacks %q:\n%s", want, groups[0])
		}
	}
	if n := strings.Count(groups[0], `name="target"`); n != 4 {
		t.Errorf("the first group's forms carry %d targets, want 4 (2 in the group's form, 1 in each row's)", n)
	}
}
