package auth_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/services/console/internal/auth"
	"github.com/spanmart/spanmart/services/console/internal/consoletest"
)

const audience = "https://console-123.asia-northeast1.run.app"

func newAuth(t *testing.T, iss *consoletest.Issuer) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(auth.Config{Issuer: iss.URL, Audience: audience, Allowed: []string{consoletest.Operator}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNewNeedsIssuerAudienceAndOperators(t *testing.T) {
	for _, cfg := range []auth.Config{
		{Audience: audience, Allowed: []string{consoletest.Operator}},
		{Issuer: "https://accounts.google.com", Allowed: []string{consoletest.Operator}},
		{Issuer: "https://accounts.google.com", Audience: audience},
	} {
		if _, err := auth.New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
}

// TestLoginOverHTTPS: the console's URL is https (Cloud Run terminates TLS in front of it), so
// the cookie is Secure although the request reaching the process is plain http; the token never
// stays in the URL that the handlers and the access log see.
func TestLoginOverHTTPS(t *testing.T) {
	iss := consoletest.NewIssuer(t)
	a := newAuth(t, iss)
	tok := iss.Token(t, audience, consoletest.Operator)
	e := echo.New()
	e.Pre(auth.HideLoginToken)
	var seen []string
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			seen = append(seen, c.Request().RequestURI, c.Request().URL.String())
			return next(c)
		}
	})
	e.GET(auth.PathLogin, a.Login(auth.ProblemRefusal))
	e.POST(auth.PathLogin, a.Login(auth.ProblemRefusal))

	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/login?next=x&token="+url.QueryEscape(tok), nil),
		func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}(),
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("%s /login = %d %s", req.Method, rec.Code, rec.Body)
		}
		ck := rec.Result().Cookies()
		if len(ck) != 1 || !ck[0].Secure || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Value != tok {
			t.Errorf("%s /login cookie = %+v, want Secure, HttpOnly, SameSite=Strict", req.Method, ck)
		}
	}
	for _, s := range seen {
		if strings.Contains(s, tok) || strings.Contains(s, "token=") {
			t.Errorf("the handlers saw the token in the URL: %s", s)
		}
	}
	if len(seen) == 0 || !strings.Contains(seen[0], "next=x") {
		t.Errorf("the rest of the query was lost: %v", seen)
	}
}

func TestGuard(t *testing.T) {
	iss := consoletest.NewIssuer(t)
	a := newAuth(t, iss)
	e := echo.New()
	var who auth.Identity
	ok := func(c echo.Context) error {
		who = auth.IdentityOf(c.Request().Context())
		return c.NoContent(http.StatusNoContent)
	}
	guard := a.Guard(func(c echo.Context, r auth.Refusal) error { return c.String(r.Status, r.Detail) })
	e.GET("/x", ok, guard)
	e.POST("/x", ok, guard)
	tok := iss.Token(t, audience, consoletest.Operator)

	// The CSRF token of a cookie session, as the guard hands it to the pages.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.AddCookie(&http.Cookie{Name: auth.CookieName, Value: tok})
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent || who.Email != consoletest.Operator || who.CSRF == "" {
		t.Fatalf("GET with the session = %d, identity %+v", rec.Code, who)
	}
	csrf := who.CSRF

	for _, tc := range []struct {
		name         string
		method       string
		bearer       string
		cookie, form string
		want         int
	}{
		{"no credentials", http.MethodGet, "", "", "", http.StatusUnauthorized},
		{"a stranger", http.MethodGet, iss.Token(t, audience, consoletest.Stranger), "", "", http.StatusForbidden},
		{"another audience", http.MethodGet, iss.Token(t, "https://other.example.com", consoletest.Operator), "", "", http.StatusUnauthorized},
		{"the operator's bearer", http.MethodGet, tok, "", "", http.StatusNoContent},
		{"a POST with the bearer and its CSRF token", http.MethodPost, tok, "", csrf, http.StatusNoContent},
		{"a POST with the bearer and no CSRF token", http.MethodPost, tok, "", "", http.StatusForbidden},
		{"a POST with the session and its CSRF token", http.MethodPost, "", tok, csrf, http.StatusNoContent},
		{"a POST with the session and no CSRF token", http.MethodPost, "", tok, "", http.StatusForbidden},
		{"a POST with the session and a wrong CSRF token", http.MethodPost, "", tok, csrf[1:] + "A", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body *strings.Reader
			if tc.form != "" {
				body = strings.NewReader(url.Values{auth.FieldCSRF: {tc.form}}.Encode())
			} else {
				body = strings.NewReader("")
			}
			req := httptest.NewRequest(tc.method, "/x", body)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
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
		})
	}
}

func TestLogoutClearsTheCookie(t *testing.T) {
	a := newAuth(t, consoletest.NewIssuer(t))
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/logout", nil), rec)
	if err := a.Logout(c); err != nil {
		t.Fatal(err)
	}
	ck := rec.Result().Cookies()
	if len(ck) != 1 || ck[0].Name != auth.CookieName || ck[0].MaxAge >= 0 || ck[0].Value != "" {
		t.Errorf("logout cookie = %+v, want %s cleared", ck, auth.CookieName)
	}
	if rec.Code != http.StatusSeeOther {
		t.Errorf("logout = %d, want 303", rec.Code)
	}
}
