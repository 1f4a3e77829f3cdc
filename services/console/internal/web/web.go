// Package web is the console's HTTP surface: server-rendered pages (html/template, with the
// stylesheet and the one small script embedded and served by the console itself) over the
// services' operator APIs, read and acted on through internal/adminclient:
//
//	GET  /                 the overview: every outbox (the relay) and every consumer, refreshed live
//	GET  /api/overview     the overview's tables alone (an HTML fragment the page fetches every few seconds)
//	GET  /failed           quarantined outbox events and every consumer's dead letters, grouped by error
//	POST /failed/replay    replay one of them, or a group (form: target..., reason, csrf)
//	GET  /orders?q=        find an order by id (or a customer's stuck orders)
//	GET  /orders/{id}      an order's trace across the services, hop by hop
//	GET  /stuck            orders' stuck-order detector and reconciliation
//	GET  /login?token=     sign in (package auth; behind Identity-Aware Proxy, IAP signs in); POST /logout signs out
//
// Every page and the API are behind auth.Guard; every call to a service names the signed-in
// operator in X-Spanmart-On-Behalf-Of (adminclient.WithOnBehalfOf) and carries the console's own
// ID token. A service that does not answer is shown as such on the page: a page is never a 500
// because a service is down.
package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/services/console/internal/auth"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DefaultRefresh is how often the overview refetches its tables.
const DefaultRefresh = 5 * time.Second

// DefaultTimeout bounds the calls behind one page: a service that has not answered by then is
// shown as not answering.
const DefaultTimeout = 15 * time.Second

// Config configures New.
type Config struct {
	Client *adminclient.Client // the services, called with the console's own ID tokens
	Auth   *auth.Authenticator // who the user is
	// Refresh is the overview's refresh interval; 0 means DefaultRefresh.
	Refresh time.Duration
	// Timeout bounds the service calls of one request; 0 means DefaultTimeout.
	Timeout time.Duration
	// Now is the clock (ages on the pages); nil means time.Now.
	Now func() time.Time
}

// Server serves the console.
type Server struct {
	client  *adminclient.Client
	auth    *auth.Authenticator
	refresh time.Duration
	timeout time.Duration
	now     func() time.Time
	pages   *pages
}

// New returns the console's server.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil || cfg.Auth == nil {
		return nil, errors.New("web: Config.Client and Config.Auth are required")
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{client: cfg.Client, auth: cfg.Auth, refresh: cfg.Refresh, timeout: cfg.Timeout, now: cfg.Now, pages: p}
	if s.refresh <= 0 {
		s.refresh = DefaultRefresh
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Paths of the console.
const (
	PathOverview    = "/"
	PathAPIOverview = "/api/overview"
	PathFailed      = "/failed"
	PathReplay      = "/failed/replay"
	PathOrders      = "/orders"
	PathStuck       = "/stuck"
	PathStatic      = "/static/"
)

// Register adds the console's routes to e. The stylesheet and the script are public (the sign-in
// page uses them; they hold nothing); everything else needs an operator. e must have
// auth.HideLoginToken among its Pre middleware.
func (s *Server) Register(e *echo.Echo) {
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded directory exists: a build without it does not compile
	}
	e.GET(PathStatic+"*", echo.WrapHandler(http.StripPrefix(PathStatic, staticHandler(static))))
	e.GET(auth.PathLogin, s.auth.Login(s.refusePage))
	e.POST(auth.PathLogin, s.auth.Login(s.refusePage))

	// Per route rather than in a group: a group's middleware would also answer every unknown
	// path (echo routes them through it).
	page, api := s.auth.Guard(s.refusePage), s.auth.Guard(auth.ProblemRefusal)
	e.POST(auth.PathLogout, s.auth.Logout, page)
	// Replaces the platform's GET / (the service's name and version, for anyone).
	e.GET(PathOverview, s.overview, page)
	e.GET(PathFailed, s.failed, page)
	e.POST(PathReplay, s.replay, page)
	e.GET(PathOrders, s.orders, page)
	e.GET(PathOrders+"/:id", s.order, page)
	e.GET(PathStuck, s.stuck, page)
	e.GET(PathAPIOverview, s.overviewFragment, api)
}

// staticHandler serves the embedded assets with a short cache lifetime (they change with the
// binary, and carry no version in their names).
func staticHandler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	})
}

// callContext is the context of the service calls of one request: bounded by the timeout and
// naming the signed-in operator, on whose behalf every call is made.
func (s *Server) callContext(c echo.Context) (context.Context, context.CancelFunc) {
	ctx := c.Request().Context()
	ctx = adminclient.WithOnBehalfOf(ctx, auth.IdentityOf(ctx).Email)
	return context.WithTimeout(ctx, s.timeout)
}

// refusePage answers a refused page with a small HTML page saying how to sign in.
func (s *Server) refusePage(c echo.Context, r auth.Refusal) error {
	if r.Status == http.StatusUnauthorized {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer error="invalid_token"`)
	}
	return s.render(c, r.Status, "signin", signinView{
		Status: r.Status, Detail: r.Detail, Title: http.StatusText(r.Status), Audience: s.auth.Audience(), IAP: s.auth.BehindIAP(),
	})
}

// signinView is the refusal page.
type signinView struct {
	Status   int
	Title    string
	Detail   string
	Audience string // the console's URL: the audience of the token to sign in with
	// IAP: the console is behind Identity-Aware Proxy, which signs the operators in; there is no
	// token to paste.
	IAP bool
}

// errorView is a page's own error (a bad request, an unknown order).
type errorView struct {
	Status int
	Title  string
	Detail string
	Back   string // a link back
}

func (s *Server) renderError(c echo.Context, status int, detail, back string) error {
	return s.render(c, status, "error", errorView{Status: status, Title: http.StatusText(status), Detail: detail, Back: back})
}

// gap is a service that did not answer, as a page shows it.
type gap struct {
	Service string
	What    string
	Error   string
}

func gapOf(service, what string, err error) gap {
	return gap{Service: service, What: what, Error: describe(err)}
}

// describe is an error as the page shows it: what the service said, or that it did not answer.
func describe(err error) string {
	var ae *adminclient.Error
	switch {
	case errors.As(err, &ae):
		return fmt.Sprintf("answered %d %s%s", ae.StatusCode, http.StatusText(ae.StatusCode), detailOf(ae))
	case errors.Is(err, context.DeadlineExceeded):
		return "did not answer in time"
	case errors.Is(err, adminclient.ErrNoURL):
		return "no URL configured"
	default:
		return "did not answer: " + err.Error()
	}
}

func detailOf(ae *adminclient.Error) string {
	if ae.Detail != "" {
		return ": " + ae.Detail
	}
	return ""
}
