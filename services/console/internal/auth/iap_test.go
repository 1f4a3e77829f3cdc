package auth_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/services/console/internal/auth"
	"github.com/spanmart/spanmart/services/console/internal/consoletest"
)

func newIAPAuth(t *testing.T, s *authemu.Server) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(auth.Config{IAP: consoletest.IAPConfig(s), Allowed: []string{consoletest.Operator}})
	if err != nil {
		t.Fatal(err)
	}
	if !a.BehindIAP() || a.Audience() != consoletest.IAPAudience {
		t.Fatalf("BehindIAP %v, Audience %q", a.BehindIAP(), a.Audience())
	}
	return a
}

// TestNewBehindIAP: IAP's audience excludes the ID-token sign-in's, and still needs operators.
func TestNewBehindIAP(t *testing.T) {
	iap := auth.IAPConfig{Audience: consoletest.IAPAudience}
	for name, cfg := range map[string]auth.Config{
		"an ID-token audience too": {IAP: iap, Audience: audience, Allowed: []string{consoletest.Operator}},
		"no operators":             {IAP: iap},
	} {
		if _, err := auth.New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	if _, err := auth.New(auth.Config{IAP: iap, Allowed: []string{consoletest.Operator}}); err != nil {
		t.Errorf("IAP's defaults (issuer, key set): %v", err)
	}
}

// TestGuardBehindIAP: behind IAP the operator is who IAP's assertion names, and nothing else gets
// in: no assertion (a request that went around the proxy), an assertion that is not IAP's for this
// console (another audience or issuer, expired, too long, issued later, forged, RS256, unsigned),
// and the ID-token sign-in (a bearer or a session cookie of the operator) are 401; a valid
// assertion of someone who is not an operator is 403; IAP's keys out of reach are 503. Never 500.
func TestGuardBehindIAP(t *testing.T) {
	s := consoletest.StartIAP(t)
	a := newIAPAuth(t, s)
	iss := consoletest.NewIssuer(t) // the ID tokens of the sign-in IAP turns off
	e := echo.New()
	var who auth.Identity
	ok := func(c echo.Context) error {
		who = auth.IdentityOf(c.Request().Context())
		return c.NoContent(http.StatusNoContent)
	}
	e.GET("/x", ok, a.Guard(func(c echo.Context, r auth.Refusal) error { return c.String(r.Status, r.Detail) }))
	assertion := func(c authemu.IAPClaims) string {
		if c.Email == "" {
			c.Email = consoletest.Operator
		}
		return consoletest.Assertion(t, s, c)
	}
	good := assertion(authemu.IAPClaims{})
	forged, err := s.ForgeIAP(authemu.IAPClaims{Email: consoletest.Operator})
	if err != nil {
		t.Fatal(err)
	}
	rs256, err := s.Mint(authemu.Claims{Subject: "op", Email: consoletest.Operator, EmailVerified: true, Issuer: s.IAPIssuer(), Audience: s.IAPAudience()})
	if err != nil {
		t.Fatal(err)
	}
	_, payload, _ := strings.Cut(good, ".")
	payload, _, _ = strings.Cut(payload, ".")
	unsigned := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + payload + "." // {"alg":"none","typ":"JWT"}
	idToken := iss.Token(t, audience, consoletest.Operator)

	for _, tc := range []struct {
		name      string
		assertion string
		bearer    string
		cookie    string
		want      int
	}{
		{"an operator's assertion", good, "", "", http.StatusNoContent},
		{"an operator's assertion and a stranger's bearer", good, iss.Token(t, audience, consoletest.Stranger), "", http.StatusNoContent},
		{"no assertion", "", "", "", http.StatusUnauthorized},
		{"a blank assertion", "  ", "", "", http.StatusUnauthorized},
		{"the operator's bearer, no assertion", "", idToken, "", http.StatusUnauthorized},
		{"the operator's session cookie, no assertion", "", "", idToken, http.StatusUnauthorized},
		{"the operator's ID token as the assertion", idToken, "", "", http.StatusUnauthorized},
		{"another audience", assertion(authemu.IAPClaims{Audience: "/projects/123456789012/global/backendServices/1"}), "", "", http.StatusUnauthorized},
		{"another issuer", assertion(authemu.IAPClaims{Issuer: "https://accounts.google.com"}), "", "", http.StatusUnauthorized},
		{"expired", assertion(authemu.IAPClaims{IssuedAt: time.Now().Add(-15 * time.Minute)}), "", "", http.StatusUnauthorized},
		{"an hour long", assertion(authemu.IAPClaims{Lifetime: time.Hour}), "", "", http.StatusUnauthorized},
		{"issued in the future", assertion(authemu.IAPClaims{IssuedAt: time.Now().Add(5 * time.Minute)}), "", "", http.StatusUnauthorized},
		{"forged", forged, "", "", http.StatusUnauthorized},
		{"RS256", rs256, "", "", http.StatusUnauthorized},
		{"unsigned", unsigned, "", "", http.StatusUnauthorized},
		{"garbled", "not-a-jwt", "", "", http.StatusUnauthorized},
		{"a stranger's assertion", assertion(authemu.IAPClaims{Email: consoletest.Stranger}), "", "", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			who = auth.Identity{}
			req := httptest.NewRequest(http.MethodGet, "/x", nil)
			if tc.assertion != "" {
				req.Header.Set(auth.HeaderIAPAssertion, tc.assertion)
			}
			if tc.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			if tc.cookie != "" {
				req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: tc.cookie})
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("= %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
			if tc.want == http.StatusNoContent && (who.Email != consoletest.Operator || who.CSRF == "") {
				t.Errorf("identity %+v, want %s with a CSRF token", who, consoletest.Operator)
			}
		})
	}

	t.Run("IAP's keys out of reach", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		cfg := consoletest.IAPConfig(s)
		cfg.JWKSURL = down.URL + authemu.IAPJWKSPath
		b, err := auth.New(auth.Config{IAP: cfg, Allowed: []string{consoletest.Operator}})
		if err != nil {
			t.Fatal(err)
		}
		e := echo.New()
		e.GET("/x", ok, b.Guard(func(c echo.Context, r auth.Refusal) error { return c.String(r.Status, r.Detail) }))
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		req.Header.Set(auth.HeaderIAPAssertion, good)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("= %d %s, want 503", rec.Code, rec.Body)
		}
	})
}

// TestCSRFBehindIAP: behind IAP the forms' CSRF token is keyed with a random cookie of the
// console's (IAP's assertion may change between the page and its POST): a browser's first page
// sets it (HttpOnly, SameSite=Strict, Secure behind https), a POST needs it and the token of its
// pages, and a POST from a browser without it is refused whatever it sends, blank included.
func TestCSRFBehindIAP(t *testing.T) {
	s := consoletest.StartIAP(t)
	a := newIAPAuth(t, s)
	e := echo.New()
	var who auth.Identity
	ok := func(c echo.Context) error {
		who = auth.IdentityOf(c.Request().Context())
		return c.NoContent(http.StatusNoContent)
	}
	guard := a.Guard(func(c echo.Context, r auth.Refusal) error { return c.String(r.Status, r.Detail) })
	e.GET("/x", ok, guard)
	e.POST("/x", ok, guard)
	send := func(method string, csrfCookie *http.Cookie, form url.Values) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/x", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-Proto", "https") // as Cloud Run forwards it
		// A fresh assertion each time: IAP's may change between the page and its POST.
		req.Header.Set(auth.HeaderIAPAssertion, consoletest.Assertion(t, s, authemu.IAPClaims{Email: consoletest.Operator, IssuedAt: time.Now().Add(-time.Duration(len(form)) * time.Second)}))
		if csrfCookie != nil {
			req.AddCookie(csrfCookie)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}

	rec := send(http.MethodGet, nil, nil)
	cks := rec.Result().Cookies()
	if rec.Code != http.StatusNoContent || len(cks) != 1 || cks[0].Name != auth.CSRFCookieName {
		t.Fatalf("first GET = %d, cookies %+v, want 204 and %s", rec.Code, cks, auth.CSRFCookieName)
	}
	ck := cks[0]
	if !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || len(ck.Value) < 40 {
		t.Errorf("cookie %+v, want HttpOnly, Secure, SameSite=Strict, Path=/ and a long random value", ck)
	}
	csrf := who.CSRF
	if rec := send(http.MethodGet, ck, nil); rec.Code != http.StatusNoContent || len(rec.Result().Cookies()) != 0 || who.CSRF != csrf {
		t.Errorf("GET with the cookie = %d, cookies %v, CSRF %q, want the same token (%q) and no new cookie", rec.Code, rec.Result().Cookies(), who.CSRF, csrf)
	}
	other := send(http.MethodGet, nil, nil).Result().Cookies()[0] // another browser
	if other.Value == ck.Value {
		t.Fatal("two browsers got the same CSRF cookie")
	}

	for _, tc := range []struct {
		name   string
		cookie *http.Cookie
		form   url.Values
		want   int
	}{
		{"the cookie and its token", ck, url.Values{auth.FieldCSRF: {csrf}}, http.StatusNoContent},
		{"the cookie and no token", ck, url.Values{"x": {"y"}}, http.StatusForbidden},
		{"the cookie and another browser's token", other, url.Values{auth.FieldCSRF: {csrf}}, http.StatusForbidden},
		{"no cookie and the token", nil, url.Values{auth.FieldCSRF: {csrf}}, http.StatusForbidden},
		{"no cookie and a blank token", nil, url.Values{auth.FieldCSRF: {""}}, http.StatusForbidden},
		{"no cookie and no token", nil, url.Values{}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := send(http.MethodPost, tc.cookie, tc.form)
			if rec.Code != tc.want {
				t.Errorf("POST = %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
			if len(rec.Result().Cookies()) != 0 {
				t.Errorf("a POST set cookies: %v", rec.Result().Cookies())
			}
		})
	}
}

// TestLoginAndLogoutBehindIAP: /login has no token to take behind IAP: a request IAP let through
// goes to / with no session cookie (a token in its URL is ignored), any other is refused. The
// sign-out clears the console's CSRF cookie and hands over to IAP's, which clears IAP's login.
func TestLoginAndLogoutBehindIAP(t *testing.T) {
	s := consoletest.StartIAP(t)
	a := newIAPAuth(t, s)
	iss := consoletest.NewIssuer(t)
	e := echo.New()
	e.Pre(auth.HideLoginToken)
	e.GET(auth.PathLogin, a.Login(func(c echo.Context, r auth.Refusal) error { return c.String(r.Status, r.Detail) }))
	token := url.QueryEscape(iss.Token(t, audience, consoletest.Operator))

	for _, tc := range []struct {
		name      string
		assertion string
		want      int
	}{
		{"through IAP", consoletest.Assertion(t, s, authemu.IAPClaims{Email: consoletest.Operator}), http.StatusSeeOther},
		{"around IAP, with an operator's ID token", "", http.StatusUnauthorized},
		{"a stranger through IAP", consoletest.Assertion(t, s, authemu.IAPClaims{Email: consoletest.Stranger}), http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/login?token="+token, nil)
			if tc.assertion != "" {
				req.Header.Set(auth.HeaderIAPAssertion, tc.assertion)
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("GET /login = %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
			for _, ck := range rec.Result().Cookies() {
				if ck.Name == auth.CookieName {
					t.Errorf("behind IAP /login set the session cookie %+v", ck)
				}
			}
			if tc.want == http.StatusSeeOther && rec.Header().Get("Location") != "/" {
				t.Errorf("Location %q, want /", rec.Header().Get("Location"))
			}
		})
	}

	rec := httptest.NewRecorder()
	if err := a.Logout(echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/logout", nil), rec)); err != nil {
		t.Fatal(err)
	}
	ck := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != auth.IAPSignOut {
		t.Errorf("logout = %d to %q, want 303 to %s", rec.Code, rec.Header().Get("Location"), auth.IAPSignOut)
	}
	if len(ck) != 1 || ck[0].Name != auth.CSRFCookieName || ck[0].MaxAge >= 0 {
		t.Errorf("logout cookies = %+v, want %s cleared", ck, auth.CSRFCookieName)
	}
}
