package platform_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

// dial opens a raw connection to ts, closed when the test ends.
func dial(t *testing.T, ts *testServer) *net.TCPConn {
	t.Helper()
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn.(*net.TCPConn)
}

// readResponse reads one response from conn.
func readResponse(t *testing.T, conn net.Conn, method string) response {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hung server fails the test, not the run
	return readResponseFrom(t, bufio.NewReader(conn), method)
}

// readResponseFrom reads the next response from br (pipelined requests share one reader).
func readResponseFrom(t *testing.T, br *bufio.Reader, method string) response {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// noErrorLines fails the test if anything was logged at ERROR.
func noErrorLines(t *testing.T, ts *testServer) {
	t.Helper()
	for _, e := range ts.logs.Entries(t) {
		if e["severity"] == "ERROR" {
			t.Errorf("logged at ERROR: %v", e)
		}
	}
}

// bodyRoutes read the body the ways handlers do: returning the read error, wrapping it so
// that errors.Is no longer sees it, and through echo's Bind.
func bodyRoutes(e *echo.Echo) {
	e.POST("/raw", func(c echo.Context) error {
		b, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return err
		}
		return c.String(http.StatusOK, fmt.Sprint(len(b)))
	})
	e.POST("/wrapped", func(c echo.Context) error {
		if _, err := io.ReadAll(c.Request().Body); err != nil {
			return fmt.Errorf("read order: %v", err)
		}
		return c.NoContent(http.StatusNoContent)
	})
	e.POST("/bind", func(c echo.Context) error {
		var v map[string]string
		if err := c.Bind(&v); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	})
}

// A body shorter than its Content-Length is the client's fault: 400, logged as a warning.
func TestShortBody(t *testing.T) {
	for _, path := range []string{"/raw", "/wrapped", "/bind"} {
		t.Run(path, func(t *testing.T) {
			ts := startServer(t, platform.ServerOptions{}, bodyRoutes)
			conn := dial(t, ts)
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\": \"b", path)
			conn.CloseWrite() // the rest never comes
			resp := readResponse(t, conn, http.MethodPost)
			if resp.status != http.StatusBadRequest || resp.header.Get("Content-Type") != platform.ContentTypeProblem {
				t.Fatalf("short body = %d %s %s, want a 400 problem", resp.status, resp.header.Get("Content-Type"), resp.body)
			}
			if got := resp.json(t)["detail"]; got != "the request body could not be read (cut short or malformed)" {
				t.Errorf("detail = %v", got)
			}
			if line := ts.logs.Find(t, "POST "+path+" 400"); line["severity"] != "WARNING" {
				t.Errorf("access line severity = %v, want WARNING", line["severity"])
			}
			noErrorLines(t, ts)
		})
	}
}

// A client that gives up mid-body gets no answer, and the log shows a client error.
func TestClientGivesUpMidBody(t *testing.T) {
	ts := startServer(t, platform.ServerOptions{}, bodyRoutes)
	conn := dial(t, ts)
	fmt.Fprint(conn, "POST /raw HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\":")
	conn.Close()
	if line := ts.logs.Find(t, "POST /raw 400"); line["severity"] != "WARNING" {
		t.Errorf("access line severity = %v, want WARNING", line["severity"])
	}
	noErrorLines(t, ts)
}

// A client that goes away while the handler works is not a server error, even when the
// handler's error does not wrap context.Canceled (as Spanner's do not always).
func TestClientGoesAway(t *testing.T) {
	entered := make(chan struct{})
	ts := startServer(t, platform.ServerOptions{}, func(e *echo.Echo) {
		e.GET("/wait", func(c echo.Context) error {
			close(entered)
			<-c.Request().Context().Done()
			return errors.New("spanner: rpc error: code = Canceled")
		})
	})
	conn := dial(t, ts)
	fmt.Fprint(conn, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	conn.Close()
	if line := ts.logs.Find(t, "GET /wait 499"); line["severity"] != "WARNING" {
		t.Errorf("access line severity = %v, want WARNING", line["severity"])
	}
	noErrorLines(t, ts)
}

// A body sent slower than ReadTimeout is cut off with a 408.
func TestSlowBodyCutOff(t *testing.T) {
	ts := startServer(t, platform.ServerOptions{ReadTimeout: 50 * time.Millisecond}, bodyRoutes)
	conn := dial(t, ts)
	fmt.Fprint(conn, "POST /raw HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{\"")
	// ... and nothing more: the server must not wait for ever.
	resp := readResponse(t, conn, http.MethodPost)
	if resp.status != http.StatusRequestTimeout {
		t.Fatalf("slow body = %d %s, want 408", resp.status, resp.body)
	}
	if line := ts.logs.Find(t, "POST /raw 408"); line["severity"] != "WARNING" {
		t.Errorf("access line severity = %v, want WARNING", line["severity"])
	}
	noErrorLines(t, ts)
}

// Handlers that work longer than ReadTimeout and WriteTimeout (a sweep, an audit) keep their
// context and get their response out, also on a reused keep-alive connection; the timeouts
// bound the client's sending and reading, not the handler's work.
func TestLongHandlerOutlivesTimeouts(t *testing.T) {
	const timeout = 20 * time.Millisecond
	work := 10 * timeout // the handler's simulated work, not a wait for correctness
	ts := startServer(t, platform.ServerOptions{ReadTimeout: timeout, WriteTimeout: timeout}, func(e *echo.Echo) {
		e.GET("/fast", func(c echo.Context) error { return c.String(http.StatusOK, "fast") })
		e.POST("/long", func(c echo.Context) error {
			b, err := io.ReadAll(c.Request().Body)
			if err != nil {
				return err
			}
			select {
			case <-c.Request().Context().Done():
				return fmt.Errorf("context ended while working: %w", c.Request().Context().Err())
			case <-time.After(work):
			}
			return c.String(http.StatusOK, string(b))
		})
	})
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	for i, path := range []string{"/fast", "/long", "/long"} {
		var resp *http.Response
		var err error
		if path == "/fast" {
			resp, err = client.Get(ts.url + path)
		} else {
			resp, err = client.Post(ts.url+path, "text/plain", strings.NewReader("done"))
		}
		if err != nil {
			t.Fatalf("request %d %s: %v", i, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("request %d %s = %d %s, want 200", i, path, resp.StatusCode, b)
		}
	}
	noErrorLines(t, ts)
}

// HEAD works on every GET route: the GET's status and headers, no body.
func TestHead(t *testing.T) {
	ts := startServer(t, platform.ServerOptions{}, func(e *echo.Echo) {
		e.GET("/items/:id", func(c echo.Context) error {
			return c.JSON(http.StatusOK, map[string]string{"id": c.Param("id"), "method": c.Request().Method})
		})
		e.POST("/items", func(c echo.Context) error { return c.NoContent(http.StatusCreated) })
	})
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/healthz", http.StatusOK},
		{"/items/7", http.StatusOK},
		{"/items", http.StatusMethodNotAllowed}, // POST only
		{"/nowhere", http.StatusNotFound},
	} {
		t.Run(tc.path, func(t *testing.T) {
			head := do(t, http.MethodHead, ts.url+tc.path, nil, nil)
			if head.status != tc.status || len(head.body) != 0 {
				t.Errorf("HEAD %s = %d with %d body bytes, want %d and none", tc.path, head.status, len(head.body), tc.status)
			}
			if tc.status == http.StatusOK {
				get := get(t, ts.url+tc.path, nil)
				if head.header.Get("Content-Type") != get.header.Get("Content-Type") {
					t.Errorf("HEAD Content-Type %q, GET's %q", head.header.Get("Content-Type"), get.header.Get("Content-Type"))
				}
			}
			line := ts.logs.Find(t, fmt.Sprintf("HEAD %s %d", tc.path, tc.status))
			if hr, _ := line[platform.FieldHTTPRequest].(map[string]any); hr["requestMethod"] != "HEAD" {
				t.Errorf("access line httpRequest = %v, want requestMethod HEAD", hr)
			}
		})
	}
	// The handler sees the request's own method, and GET is untouched.
	conn := dial(t, ts)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	fmt.Fprint(conn, "HEAD /items/7 HTTP/1.1\r\nHost: x\r\n\r\nGET /items/8 HTTP/1.1\r\nHost: x\r\n\r\n")
	if r := readResponseFrom(t, br, http.MethodHead); r.status != http.StatusOK || len(r.body) != 0 {
		t.Errorf("HEAD = %d %q", r.status, r.body)
	}
	if r := readResponseFrom(t, br, http.MethodGet); string(r.body) != `{"id":"8","method":"GET"}`+"\n" {
		t.Errorf("GET after HEAD on the same connection = %d %q", r.status, r.body)
	}
}

// The logged client address is the connection's, unless the server trusts the front end's
// X-Forwarded-For; then it is the entry the front end appended (the last).
func TestRemoteIP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		trust bool
		xff   []string
		want  string
	}{
		{name: "untrusted header ignored", xff: []string{"203.0.113.9"}, want: "127.0.0.1"},
		{name: "untrusted chain ignored", xff: []string{"198.51.100.1, 203.0.113.9"}, want: "127.0.0.1"},
		{name: "trusted: no header", trust: true, want: "127.0.0.1"},
		{name: "trusted: the last entry", trust: true, xff: []string{"198.51.100.1, 203.0.113.9"}, want: "203.0.113.9"},
		{name: "trusted: forged entries before it", trust: true, xff: []string{"10.0.0.1", "1.2.3.4,2001:db8::1"}, want: "2001:db8::1"},
		{name: "trusted: garbage last", trust: true, xff: []string{"203.0.113.9, not-an-ip"}, want: "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, platform.ServerOptions{TrustForwardedFor: tc.trust}, func(e *echo.Echo) {
				e.GET("/ip", func(c echo.Context) error { return c.String(http.StatusOK, c.RealIP()) })
			})
			req, err := http.NewRequest(http.MethodGet, ts.url+"/ip", nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tc.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != tc.want {
				t.Errorf("RealIP = %q, want %q", b, tc.want)
			}
			line := ts.logs.Find(t, "GET /ip 200")
			if hr, _ := line[platform.FieldHTTPRequest].(map[string]any); hr["remoteIp"] != tc.want {
				t.Errorf("logged remoteIp = %v, want %s", hr["remoteIp"], tc.want)
			}
		})
	}
}

// A client that stops reading the response is cut off WriteTimeout after the response started.
func TestSlowReaderCutOff(t *testing.T) {
	written := make(chan error, 1)
	ts := startServer(t, platform.ServerOptions{WriteTimeout: 50 * time.Millisecond}, func(e *echo.Echo) {
		e.GET("/big", func(c echo.Context) error {
			chunk := make([]byte, 64<<10)
			for range 1024 { // 64 MiB: far more than the socket buffers hold
				if _, err := c.Response().Write(chunk); err != nil {
					written <- err
					return nil
				}
			}
			written <- nil
			return nil
		})
	})
	conn := dial(t, ts)
	fmt.Fprint(conn, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	// ... and never read.
	select {
	case err := <-written:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("writing to a client that does not read: %v, want a deadline error", err)
		}
	case <-time.After(platformtest.Timeout):
		t.Fatal("the write to a client that does not read was never cut off")
	}
}
