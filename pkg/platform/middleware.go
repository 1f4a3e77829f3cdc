package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

const (
	ctxKeyError = "platform.error"
	ctxKeyHead  = "platform.head"
	ctxKeyBody  = "platform.body"
	ctxKeyQuiet = "platform.quiet"
)

// Quiet is route middleware for a machine-to-machine route that every commit or delivery of the
// system calls (a Cloud Tasks delivery to POST /events, whose outcome the consumer logs on its
// own line; a producer's POST /nudge): its answers below 400 are logged at debug level, as the
// health and metrics routes' are, so that the logs keep one line per thing that happened rather
// than two. Its failures are logged as any route's; its metrics are unchanged, and Cloud Run's
// request log still has every request.
func Quiet(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(ctxKeyQuiet, true)
		return next(c)
	}
}

// headAsGet routes HEAD like GET, since echo has no automatic HEAD: every GET route answers HEAD
// with its headers and status and no body. It runs before routing and changes the method in place
// (echo routes by the request net/http passed in); observe restores it before any handler runs,
// and net/http then discards the body of the HEAD response.
func headAsGet(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if req := c.Request(); req.Method == http.MethodHead {
			req.Method = http.MethodGet
			c.Set(ctxKeyHead, true)
		}
		return next(c)
	}
}

// lastForwardedFor is the IPExtractor behind Google's front end, which appends the address it
// received the request from to X-Forwarded-For: the last entry is the one not written by the
// client. Without a parseable entry it is the connection's peer.
func lastForwardedFor(req *http.Request) string {
	xff := strings.Join(req.Header.Values(echo.HeaderXForwardedFor), ",")
	if xff != "" {
		last := strings.TrimSpace(xff[strings.LastIndexByte(xff, ',')+1:])
		if ip := net.ParseIP(strings.Trim(last, "[]")); ip != nil {
			return ip.String()
		}
	}
	return echo.ExtractIPDirect()(req)
}

// observe is the outermost middleware: request id, trace, the request logger in the context,
// then (after the handler) the error response, metrics and one access log line.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		req := c.Request()
		if c.Get(ctxKeyHead) == true {
			req.Method = http.MethodHead
		}
		s.setWriteDeadline(c)
		id := requestIDFrom(req.Header.Get(echo.HeaderXRequestID))
		c.Response().Header().Set(echo.HeaderXRequestID, id)

		fields := []zap.Field{zap.String("request_id", id)}
		trace, _ := TraceFromHeader(req.Header)
		fields = append(fields, trace.LogFields(s.opts.Project)...)
		log := s.log.With(fields...)
		ctx := WithLogger(req.Context(), log)
		ctx = WithTrace(ctx, trace)
		ctx = context.WithValue(ctx, requestIDKey{}, id)
		c.SetRequest(req.WithContext(ctx))

		if err := next(c); err != nil {
			c.Error(err) // writes the problem now, so the status below is the one sent
		}
		if !c.Response().Committed {
			s.startWriteDeadline(c) // net/http writes the response the handler left empty
		}

		res := c.Response()
		latency := time.Since(start)
		route := c.Path()
		if route == "" {
			// Unmatched paths would give every scanner probe its own time series.
			route = "unmatched"
		}
		s.metrics.observe(route, req.Method, res.Status, latency)

		level := zapcore.InfoLevel
		switch {
		case res.Status >= 500:
			level = zapcore.ErrorLevel
		case res.Status >= 400:
			level = zapcore.WarnLevel
		case route == PathHealthz || route == PathReadyz || route == PathMetrics || c.Get(ctxKeyQuiet) == true:
			level = zapcore.DebugLevel
		}
		if ce := log.Check(level, fmt.Sprintf("%s %s %d", req.Method, req.URL.Path, res.Status)); ce != nil {
			f := []zap.Field{
				zap.Object(FieldHTTPRequest, httpRequest{req: req, status: res.Status, size: res.Size, latency: latency, ip: c.RealIP()}),
				zap.String("route", route),
			}
			if err, ok := c.Get(ctxKeyError).(error); ok && res.Status >= 500 {
				f = append(f, zap.Error(err))
			}
			ce.Write(f...)
		}
		return nil
	}
}

// requestIDFrom honours an incoming id a load balancer or caller set, unless it could garble
// the logs (too long, or not printable ASCII); otherwise it makes a new one.
func requestIDFrom(v string) string {
	if v != "" && len(v) <= 128 {
		ok := true
		for _, c := range []byte(v) {
			if c < 0x21 || c > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return v
		}
	}
	return uuid.NewString()
}

// recoverPanics turns a handler panic into a 500 and logs its stack; the process keeps serving.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			if r == http.ErrAbortHandler {
				panic(r) // net/http's way to abort a response; it handles it quietly
			}
			Logger(c.Request().Context()).Error("panic in handler",
				zap.String("panic", fmt.Sprint(r)),
				zap.ByteString("stack_trace", debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
		}()
		return next(c)
	}
}

// setWriteDeadline arms the write timeout for when the response starts (see
// ServerOptions.WriteTimeout): every write goes through echo's Response, whose Before hooks run
// before the status line, so the deadline a previous request on a keep-alive connection left
// is replaced before anything of this response is written.
func (s *Server) setWriteDeadline(c echo.Context) {
	c.Response().Before(func() { s.startWriteDeadline(c) })
}

// startWriteDeadline gives the response WriteTimeout from now to be written. Errors (a writer
// without deadlines, such as httptest's recorder) leave the response without one.
func (s *Server) startWriteDeadline(c echo.Context) {
	_ = http.NewResponseController(c.Response().Writer).SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
}

// limitBody rejects bodies over the limit: at once when Content-Length says so, else when the
// handler reads past it (the read fails with *http.MaxBytesError, which maps to 413). It also
// records how reading the body failed (see bodyReader).
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	limit := s.opts.MaxBodyBytes
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > limit {
			return &http.MaxBytesError{Limit: limit}
		}
		if req.Body != nil && req.Body != http.NoBody {
			b := &bodyReader{r: http.MaxBytesReader(c.Response().Writer, req.Body, limit)}
			req.Body = b
			c.Set(ctxKeyBody, b)
		}
		return next(c)
	}
}

// bodyReader is the request body as handlers see it. It keeps the first read error, so that the
// error handler knows a failure came from the client's body (cut short, too slow, too large)
// however the handler wrapped it.
type bodyReader struct {
	r   io.ReadCloser
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func (b *bodyReader) Close() error { return b.r.Close() }

// bodyProblem is the problem of a request whose body could not be read, nil if it could (or
// was not read). None is a server error, so none is logged as one.
func bodyProblem(c echo.Context) *Problem {
	b, ok := c.Get(ctxKeyBody).(*bodyReader)
	if !ok || b.err == nil {
		return nil
	}
	var (
		mbe *http.MaxBytesError
		ne  net.Error
	)
	switch {
	case errors.As(b.err, &mbe):
		return NewProblem(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit)).Wrap(b.err)
	case errors.As(b.err, &ne) && ne.Timeout():
		return NewProblem(http.StatusRequestTimeout, "the request body was not received in time").Wrap(b.err)
	default:
		// io.ErrUnexpectedEOF: shorter than its Content-Length, or the client stopped sending.
		return NewProblem(http.StatusBadRequest, "the request body could not be read (cut short or malformed)").Wrap(b.err)
	}
}

// httpRequest is Cloud Logging's HttpRequest object, which the log viewer shows as a request line.
type httpRequest struct {
	req     *http.Request
	status  int
	size    int64
	latency time.Duration
	ip      string
}

func (h httpRequest) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("requestMethod", h.req.Method)
	enc.AddString("requestUrl", h.req.URL.RequestURI())
	if h.req.ContentLength > 0 {
		enc.AddString("requestSize", strconv.FormatInt(h.req.ContentLength, 10))
	}
	enc.AddInt("status", h.status)
	enc.AddString("responseSize", strconv.FormatInt(h.size, 10))
	if ua := h.req.UserAgent(); ua != "" {
		enc.AddString("userAgent", ua)
	}
	if h.ip != "" {
		enc.AddString("remoteIp", h.ip)
	}
	if ref := h.req.Referer(); ref != "" {
		enc.AddString("referer", ref)
	}
	enc.AddString("latency", strconv.FormatFloat(h.latency.Seconds(), 'f', 9, 64)+"s")
	enc.AddString("protocol", h.req.Proto)
	return nil
}
