package platform

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

const ctxKeyError = "platform.error"

// observe is the outermost middleware: request id, trace, the request logger in the context,
// then (after the handler) the error response, metrics and one access log line.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		req := c.Request()
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
		case route == PathHealthz || route == PathReadyz || route == PathMetrics:
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

// limitBody rejects bodies over the limit: at once when Content-Length says so, else when the
// handler reads past it (the read fails with *http.MaxBytesError, which maps to 413).
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	limit := s.opts.MaxBodyBytes
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > limit {
			return &http.MaxBytesError{Limit: limit}
		}
		if req.Body != nil && req.Body != http.NoBody {
			req.Body = http.MaxBytesReader(c.Response().Writer, req.Body, limit)
		}
		return next(c)
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
