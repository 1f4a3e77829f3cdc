package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

type testServer struct {
	srv  *platform.Server
	url  string
	addr string
	logs *platformtest.Logs
	run  *platformtest.Running
}

// startServer serves a platform server with the given options and routes on a free port.
func startServer(t *testing.T, opts platform.ServerOptions, routes func(e *echo.Echo)) *testServer {
	t.Helper()
	log, logs := platformtest.NewLogger(t, "test")
	opts.Logger, opts.Service, opts.Project = log, "test", "proj"
	s := platform.NewServer(opts)
	if routes != nil {
		routes(s.Echo)
	}
	ln := platformtest.Listen(t)
	run := platformtest.Start(t, func(ctx context.Context) error { return s.Serve(ctx, ln) })
	return &testServer{srv: s, url: "http://" + ln.Addr().String(), addr: ln.Addr().String(), logs: logs, run: run}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

func do(t *testing.T, method, url string, body io.Reader, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func get(t *testing.T, url string, header map[string]string) response {
	t.Helper()
	return do(t, http.MethodGet, url, nil, header)
}

func TestRequestLoggerTraceFields(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   map[string]any
	}{
		{
			name:   "traceparent",
			header: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			want: map[string]any{
				platform.FieldTrace:        "projects/proj/traces/4bf92f3577b34da6a3ce929d0e0e4736",
				platform.FieldSpanID:       "00f067aa0ba902b7",
				platform.FieldTraceSampled: true,
			},
		},
		{
			name:   "X-Cloud-Trace-Context",
			header: map[string]string{"X-Cloud-Trace-Context": "105445aa7843bc8bf206b12000100000/123;o=0"},
			want: map[string]any{
				platform.FieldTrace:        "projects/proj/traces/105445aa7843bc8bf206b12000100000",
				platform.FieldSpanID:       "000000000000007b",
				platform.FieldTraceSampled: false,
			},
		},
		{name: "no trace", want: map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, platform.ServerOptions{}, func(e *echo.Echo) {
				e.GET("/log", func(c echo.Context) error {
					platform.Logger(c.Request().Context()).Info("in handler")
					return c.NoContent(http.StatusNoContent)
				})
			})
			resp := get(t, ts.url+"/log?x=1", tc.header)
			if resp.status != http.StatusNoContent {
				t.Fatalf("status = %d, want 204", resp.status)
			}
			id := resp.header.Get("X-Request-Id")

			traceFields := func(e map[string]any) map[string]any {
				got := map[string]any{}
				for _, k := range []string{platform.FieldTrace, platform.FieldSpanID, platform.FieldTraceSampled} {
					if v, ok := e[k]; ok {
						got[k] = v
					}
				}
				return got
			}
			line := ts.logs.Find(t, "in handler")
			if line["severity"] != "INFO" || line["request_id"] != id {
				t.Errorf("handler line severity %v request_id %v, want INFO %s", line["severity"], line["request_id"], id)
			}
			if diff := cmp.Diff(tc.want, traceFields(line)); diff != "" {
				t.Errorf("handler line trace fields mismatch (-want +got):\n%s", diff)
			}

			access := ts.logs.Find(t, "GET /log 204")
			if diff := cmp.Diff(tc.want, traceFields(access)); diff != "" {
				t.Errorf("access line trace fields mismatch (-want +got):\n%s", diff)
			}
			hr, _ := access[platform.FieldHTTPRequest].(map[string]any)
			latency, _ := hr["latency"].(string)
			if !strings.HasSuffix(latency, "s") {
				t.Errorf("httpRequest.latency = %q, want a duration in seconds like 0.001s", latency)
			}
			delete(hr, "latency")
			wantHR := map[string]any{
				"requestMethod": "GET",
				"requestUrl":    "/log?x=1",
				"status":        float64(204),
				"responseSize":  "0",
				"userAgent":     "Go-http-client/1.1",
				"remoteIp":      "127.0.0.1",
				"protocol":      "HTTP/1.1",
			}
			if diff := cmp.Diff(wantHR, hr); diff != "" {
				t.Errorf("httpRequest mismatch (-want +got):\n%s", diff)
			}
			if access["severity"] != "INFO" || access["request_id"] != id || access["route"] != "/log" {
				t.Errorf("access line = %v, want INFO with request_id %s and route /log", access, id)
			}
		})
	}
}

func TestRequestID(t *testing.T) {
	ts := startServer(t, platform.ServerOptions{}, func(e *echo.Echo) {
		e.GET("/id", func(c echo.Context) error {
			return c.String(http.StatusOK, platform.RequestID(c.Request().Context()))
		})
	})
	t.Run("incoming honoured", func(t *testing.T) {
		resp := get(t, ts.url+"/id", map[string]string{"X-Request-Id": "lb-42"})
		if got := resp.header.Get("X-Request-Id"); got != "lb-42" {
			t.Errorf("response X-Request-Id = %q, want lb-42", got)
		}
		if got := string(resp.body); got != "lb-42" {
			t.Errorf("RequestID(ctx) = %q, want lb-42", got)
		}
		problem := get(t, ts.url+"/nowhere", map[string]string{"X-Request-Id": "lb-43"}).json(t)
		if problem["request_id"] != "lb-43" {
			t.Errorf("problem request_id = %v, want lb-43", problem["request_id"])
		}
	})
	for name, incoming := range map[string]string{
		"absent":       "",
		"with a space": "two words",
		"too long":     strings.Repeat("x", 129),
	} {
		t.Run(name, func(t *testing.T) {
			resp := get(t, ts.url+"/id", map[string]string{"X-Request-Id": incoming})
			got := resp.header.Get("X-Request-Id")
			if _, err := uuid.Parse(got); err != nil {
				t.Errorf("response X-Request-Id = %q, want a generated UUID", got)
			}
			if string(resp.body) != got {
				t.Errorf("RequestID(ctx) = %q, want the response header %q", resp.body, got)
			}
		})
	}
}

func TestPanicRecovery(t *testing.T) {
	ts := startServer(t, platform.ServerOptions{}, func(e *echo.Echo) {
		e.GET("/panic", func(c echo.Context) error { panic("boom") })
		e.GET("/ok", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	})
	resp := get(t, ts.url+"/panic", nil)
	if resp.status != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500", resp.status)
	}
	if ct := resp.header.Get("Content-Type"); ct != platform.ContentTypeProblem {
		t.Errorf("Content-Type = %q, want %s", ct, platform.ContentTypeProblem)
	}
	body := resp.json(t)
	delete(body, "request_id")
	want := map[string]any{"type": "about:blank", "title": "Internal Server Error", "status": float64(500), "instance": "/panic"}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body mismatch (-want +got):\n%s", diff)
	}
	line := ts.logs.Find(t, "panic in handler")
	if line["severity"] != "ERROR" || line["panic"] != "boom" || !strings.Contains(fmt.Sprint(line["stack_trace"]), "server_test.go") {
		t.Errorf("panic log line = %v, want ERROR with the panic value and a stack through this test", line)
	}
	if got := get(t, ts.url+"/ok", nil); got.status != http.StatusOK {
		t.Errorf("after the panic GET /ok = %d, want 200", got.status)
	}
}

func TestBodyLimit(t *testing.T) {
	ts := startServer(t, platform.ServerOptions{MaxBodyBytes: 16}, bodyRoutes)
	// unsized hides the length from the client, which then sends the body chunked, so only the
	// read limit can catch it.
	unsized := func(s string) io.Reader { return io.MultiReader(strings.NewReader(s)) }
	for _, tc := range []struct {
		name string
		path string
		body io.Reader
		want int
	}{
		{name: "at the limit", path: "/raw", body: strings.NewReader(strings.Repeat("a", 16)), want: http.StatusOK},
		{name: "content-length over the limit", path: "/raw", body: strings.NewReader(strings.Repeat("a", 17)), want: http.StatusRequestEntityTooLarge},
		{name: "chunked over the limit", path: "/raw", body: unsized(strings.Repeat("a", 17)), want: http.StatusRequestEntityTooLarge},
		{name: "chunked bind over the limit", path: "/bind", body: unsized(`{"a":"` + strings.Repeat("a", 20) + `"}`), want: http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, http.MethodPost, ts.url+tc.path, tc.body, map[string]string{"Content-Type": "application/json"})
			if resp.status != tc.want {
				t.Fatalf("status = %d (%s), want %d", resp.status, resp.body, tc.want)
			}
			if tc.want != http.StatusRequestEntityTooLarge {
				return
			}
			body := resp.json(t)
			delete(body, "request_id")
			want := map[string]any{
				"type": "about:blank", "title": "Request Entity Too Large", "status": float64(413),
				"detail": "request body exceeds 16 bytes", "instance": tc.path,
			}
			if diff := cmp.Diff(want, body); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

var (
	errNotFound = errors.New("order not found")
	errConflict = errors.New("order is not pending")
)

func TestErrorHandler(t *testing.T) {
	ts := startServer(t, platform.ServerOptions{
		ErrorMapper: platform.MapErrors(map[error]int{errNotFound: http.StatusNotFound, errConflict: http.StatusConflict}),
	}, func(e *echo.Echo) {
		e.GET("/bad", func(c echo.Context) error { return echo.NewHTTPError(http.StatusBadRequest, "limit must be a number") })
		e.GET("/orders/:id", func(c echo.Context) error { return fmt.Errorf("load order %s: %w", c.Param("id"), errNotFound) })
		e.POST("/orders/:id/confirm", func(c echo.Context) error { return fmt.Errorf("confirm order %s: %w", c.Param("id"), errConflict) })
		e.POST("/orders", func(c echo.Context) error {
			p := platform.NewProblem(http.StatusUnprocessableEntity, "quantity must be positive")
			p.Type = "https://spanmart.dev/problems/validation"
			p.Extensions = map[string]any{"field": "lines[0].quantity"}
			return p
		})
		e.GET("/internal", func(c echo.Context) error { return errors.New("spanner: session abc on host 10.0.0.1 broke") })
		e.GET("/unavailable", func(c echo.Context) error {
			return platform.NewProblem(http.StatusServiceUnavailable, "payments provider down").Wrap(errors.New("dial tcp: refused"))
		})
	})
	for _, tc := range []struct {
		name, method, path string
		want               map[string]any
	}{
		{name: "echo 400", method: "GET", path: "/bad",
			want: map[string]any{"type": "about:blank", "title": "Bad Request", "status": float64(400), "detail": "limit must be a number", "instance": "/bad"}},
		{name: "domain 404", method: "GET", path: "/orders/o-1",
			want: map[string]any{"type": "about:blank", "title": "Not Found", "status": float64(404), "detail": "load order o-1: order not found", "instance": "/orders/o-1"}},
		{name: "domain 409", method: "POST", path: "/orders/o-1/confirm",
			want: map[string]any{"type": "about:blank", "title": "Conflict", "status": float64(409), "detail": "confirm order o-1: order is not pending", "instance": "/orders/o-1/confirm"}},
		{name: "problem 422", method: "POST", path: "/orders",
			want: map[string]any{"type": "https://spanmart.dev/problems/validation", "title": "Unprocessable Entity", "status": float64(422), "detail": "quantity must be positive", "instance": "/orders", "field": "lines[0].quantity"}},
		{name: "unknown error 500 hides details", method: "GET", path: "/internal",
			want: map[string]any{"type": "about:blank", "title": "Internal Server Error", "status": float64(500), "instance": "/internal"}},
		{name: "problem 503 keeps its own detail", method: "GET", path: "/unavailable",
			want: map[string]any{"type": "about:blank", "title": "Service Unavailable", "status": float64(503), "detail": "payments provider down", "instance": "/unavailable"}},
		{name: "no route", method: "GET", path: "/nowhere",
			want: map[string]any{"type": "about:blank", "title": "Not Found", "status": float64(404), "detail": "Not Found", "instance": "/nowhere"}},
		{name: "wrong method", method: "DELETE", path: "/bad",
			want: map[string]any{"type": "about:blank", "title": "Method Not Allowed", "status": float64(405), "detail": "Method Not Allowed", "instance": "/bad"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(t, tc.method, ts.url+tc.path, nil, nil)
			if ct := resp.header.Get("Content-Type"); ct != platform.ContentTypeProblem {
				t.Errorf("Content-Type = %q, want %s", ct, platform.ContentTypeProblem)
			}
			body := resp.json(t)
			if body["request_id"] != resp.header.Get("X-Request-Id") {
				t.Errorf("request_id = %v, want the response's X-Request-Id %q", body["request_id"], resp.header.Get("X-Request-Id"))
			}
			delete(body, "request_id")
			if diff := cmp.Diff(tc.want, body); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
			if got, want := resp.status, int(tc.want["status"].(float64)); got != want {
				t.Errorf("status = %d, want %d", got, want)
			}

			// Only 5xx are errors in the log; the access line carries the cause.
			line := ts.logs.Find(t, fmt.Sprintf("%s %s %d", tc.method, tc.path, resp.status))
			wantSeverity := "WARNING"
			if resp.status >= 500 {
				wantSeverity = "ERROR"
				if line["error"] == nil {
					t.Errorf("5xx access line has no error field: %v", line)
				}
			}
			if line["severity"] != wantSeverity {
				t.Errorf("access line severity = %v, want %s", line["severity"], wantSeverity)
			}
		})
	}
	for _, e := range ts.logs.Entries(t) {
		if e["severity"] == "ERROR" && !strings.Contains(e["message"].(string), " 50") {
			t.Errorf("unexpected error line: %v", e)
		}
	}
	internal := ts.logs.Find(t, "GET /internal 500")
	if !strings.Contains(fmt.Sprint(internal["error"]), "session abc") {
		t.Errorf("the 500's access line error = %v, want the internal cause", internal["error"])
	}
}

func TestMetrics(t *testing.T) {
	ts := startServer(t, platform.ServerOptions{Version: "v1"}, func(e *echo.Echo) {
		e.GET("/items/:id", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	})
	get(t, ts.url+"/items/1", nil)
	get(t, ts.url+"/items/2", nil)
	get(t, ts.url+"/scanner/probe/1", nil)
	var text string
	platformtest.Eventually(t, "request metrics", func() bool {
		text = string(get(t, ts.url+"/metrics", nil).body)
		return strings.Contains(text, `http_requests_total{method="GET",route="unmatched",status="404"} 1`)
	})
	for _, want := range []string{
		`http_requests_total{method="GET",route="/items/:id",status="204"} 2`,
		`http_request_duration_seconds_bucket{method="GET",route="/items/:id",le="0.005"}`,
		`http_request_duration_seconds_count{method="GET",route="/items/:id"} 2`,
		`spanmart_build_info{service="test",version="v1"} 1`,
		"go_goroutines ",
		"process_cpu_seconds_total ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// Profiles are served only when Profiling is on.
func TestPprof(t *testing.T) {
	off := startServer(t, platform.ServerOptions{}, nil)
	if resp := get(t, off.url+"/debug/pprof/", nil); resp.status != http.StatusNotFound {
		t.Errorf("without Profiling: GET /debug/pprof/ = %d, want 404", resp.status)
	}
	on := startServer(t, platform.ServerOptions{Profiling: true}, nil)
	if resp := get(t, on.url+"/debug/pprof/", nil); resp.status != http.StatusOK || !strings.Contains(string(resp.body), "goroutine") {
		t.Errorf("GET /debug/pprof/ = %d %.80q", resp.status, resp.body)
	}
	if resp := get(t, on.url+"/debug/pprof/heap?debug=1", nil); resp.status != http.StatusOK || !strings.Contains(string(resp.body), "heap profile") {
		t.Errorf("GET /debug/pprof/heap = %d %.80q", resp.status, resp.body)
	}
}

func TestHealthz(t *testing.T) {
	ts := startServer(t, platform.ServerOptions{}, nil)
	resp := get(t, ts.url+"/healthz", nil)
	if diff := cmp.Diff(map[string]any{"status": "ok"}, resp.json(t)); resp.status != http.StatusOK || diff != "" {
		t.Errorf("GET /healthz = %d %s", resp.status, diff)
	}
	// Probes succeed quietly: their access lines are debug.
	line := ts.logs.Find(t, "GET /healthz 200")
	if line["severity"] != "DEBUG" {
		t.Errorf("severity = %v, want DEBUG", line["severity"])
	}
}

// TestQuietRoute: a route behind Quiet logs its successes at debug level and its failures as any
// route does; other routes log their successes at info.
func TestQuietRoute(t *testing.T) {
	ts := startServer(t, platform.ServerOptions{}, func(e *echo.Echo) {
		answer := func(c echo.Context) error {
			code, err := strconv.Atoi(c.QueryParam("code"))
			if err != nil {
				return err
			}
			return c.NoContent(code)
		}
		e.POST("/quiet", answer, platform.Quiet)
		e.POST("/loud", answer)
	})
	for _, tc := range []struct {
		path     string
		code     int
		severity string
	}{
		{"/quiet", http.StatusNoContent, "DEBUG"},
		{"/quiet", http.StatusConflict, "WARNING"},
		{"/quiet", http.StatusServiceUnavailable, "ERROR"},
		{"/loud", http.StatusNoContent, "INFO"},
	} {
		if resp := do(t, http.MethodPost, fmt.Sprintf("%s%s?code=%d", ts.url, tc.path, tc.code), nil, nil); resp.status != tc.code {
			t.Fatalf("POST %s?code=%d = %d", tc.path, tc.code, resp.status)
		}
		line := ts.logs.Find(t, fmt.Sprintf("POST %s %d", tc.path, tc.code))
		if line["severity"] != tc.severity {
			t.Errorf("POST %s %d logged at %v, want %s", tc.path, tc.code, line["severity"], tc.severity)
		}
	}
}

func TestGracefulShutdown(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	ts := startServer(t, platform.ServerOptions{}, func(e *echo.Echo) {
		e.GET("/slow", func(c echo.Context) error {
			close(entered)
			<-release
			return c.String(http.StatusOK, "finished")
		})
	})
	slow := make(chan response, 1)
	go func() {
		resp, err := http.Get(ts.url + "/slow")
		if err != nil {
			slow <- response{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		slow <- response{status: resp.StatusCode, body: b}
	}()
	<-entered

	// Begin the shutdown: Stop blocks until Serve returns, so run it aside.
	stopped := make(chan error, 1)
	go func() { stopped <- ts.run.Stop(t) }()

	platformtest.Eventually(t, "new connections to be refused", func() bool {
		conn, err := net.Dial("tcp", ts.addr)
		if err != nil {
			return true
		}
		conn.Close()
		return false
	})
	rec := httptest.NewRecorder()
	ts.srv.Echo.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "shutting down") {
		t.Errorf("/readyz while draining = %d %s, want 503 shutting down", rec.Code, rec.Body)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Serve returned %v before the in-flight request finished", err)
	default:
	}

	close(release)
	if got := <-slow; got.status != http.StatusOK || string(got.body) != "finished" {
		t.Errorf("in-flight request = %d %q, want 200 finished", got.status, got.body)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve = %v, want nil after a clean shutdown", err)
	}
}

func TestShutdownBudgetExceeded(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	ts := startServer(t, platform.ServerOptions{ShutdownTimeout: 50 * time.Millisecond}, func(e *echo.Echo) {
		e.GET("/stuck", func(c echo.Context) error {
			close(entered)
			<-release
			return nil
		})
	})
	go func() {
		if resp, err := http.Get(ts.url + "/stuck"); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	err := ts.run.Stop(t)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Serve = %v, want a deadline error when requests outlive the budget", err)
	}
}

func TestErrorAfterResponseCommitted(t *testing.T) {
	ts := startServer(t, platform.ServerOptions{}, func(e *echo.Echo) {
		e.GET("/late", func(c echo.Context) error {
			if err := c.String(http.StatusOK, "done"); err != nil {
				return err
			}
			c.Response().WriteHeader(http.StatusTeapot) // echo itself complains about this one
			return errors.New("late failure")
		})
	})
	if resp := get(t, ts.url+"/late", nil); resp.status != http.StatusOK || string(resp.body) != "done" {
		t.Errorf("GET /late = %d %q, want the 200 already sent", resp.status, resp.body)
	}
	if line := ts.logs.Find(t, "error after response was committed"); line["severity"] != "WARNING" || line["error"] != "late failure" {
		t.Errorf("log line = %v, want WARNING with the error", line)
	}
	echoLine := ts.logs.FindFunc(t, "echo's warning", func(e map[string]any) bool {
		return strings.HasSuffix(fmt.Sprint(e["message"]), " response already committed")
	})
	if line := echoLine; line["severity"] != "WARNING" || line["logger"] != "echo" {
		t.Errorf("echo's own line = %v, want WARNING from logger echo", line)
	}
}

// A listener inherited as a file descriptor (SPANMART_LISTEN_FD, as the e2e harness passes one)
// is the one the server listens on: same port, already bound.
func TestListenInheritedDescriptor(t *testing.T) {
	parent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	f, err := parent.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The descriptor is the child's to own, as an inherited one is: Listen closes it once it has
	// its listener, so it gets a duplicate here, not f's own.
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	env := platform.NewEnv(platformtest.Getenv(map[string]string{"SPANMART_LISTEN_FD": strconv.Itoa(fd)}))
	cfg := platform.LoadConfig(env, "svc", "p")
	if err := env.Err(); err != nil || cfg.ListenFD != fd {
		t.Fatalf("ListenFD = %d (%v), want %d", cfg.ListenFD, err, fd)
	}
	ln, err := cfg.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got, want := platform.Port(ln), platform.Port(parent); got != want {
		t.Errorf("inherited listener on port %d, want %d", got, want)
	}
}
