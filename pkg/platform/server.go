package platform

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	gommonlog "github.com/labstack/gommon/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ServerOptions configures NewServer. Config.ServerOptions fills it from the environment.
type ServerOptions struct {
	Service      string // labels of spanmart_build_info
	Version      string
	Project      string // for trace ids in logs
	Logger       *zap.Logger
	MaxBodyBytes int64 // 0 means DefaultMaxBodyBytes

	// ShutdownTimeout bounds the graceful shutdown; 0 means ShutdownBudget.
	ShutdownTimeout time.Duration
	// CheckTimeout bounds each readiness check; 0 means 2 s (probes time out soon after).
	CheckTimeout time.Duration
	// ErrorMapper maps the service's domain errors to statuses (see MapErrors).
	ErrorMapper ErrorMapper
	// Profiling serves net/http/pprof under PathPprof.
	Profiling bool

	// ReadTimeout bounds reading a request, headers and body, from its first byte; a body sent
	// slower is cut off with a 408. 0 means DefaultReadTimeout. It does not bound the handler:
	// net/http lifts the deadline once the body has been read, so a handler that outlives it (a
	// sweep, an audit) keeps its context.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response, counted from its status line rather than from the
	// request: a slow reader cannot hold the connection, and a long handler (the gateway's sweep
	// makes up to 400 provider calls of up to 10 s each) is not cut while it works. 0 means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its next request; 0 means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// TrustForwardedFor logs the client address Google's front end appended to X-Forwarded-For
	// (its last entry) instead of the connection's peer. Set it only behind that front end (Cloud
	// Run: Config.ServerOptions sets it when K_REVISION is set); anywhere else the header is the
	// client's to forge.
	TrustForwardedFor bool
	// MaxInFlight bounds the requests the server works on at once, AdmissionWait how long one
	// past the bound waits for a slot before it is refused with 503 (admission.go). 0 means the
	// defaults; a negative MaxInFlight means no bound.
	MaxInFlight   int
	AdmissionWait time.Duration
	// AdmissionWaitCustomer is the wait on the routes that bring new work (ShedFirst); 0
	// means the default.
	AdmissionWaitCustomer time.Duration
}

// Defaults of the server's timeouts (ServerOptions).
const (
	DefaultReadTimeout  = 30 * time.Second
	DefaultWriteTimeout = 60 * time.Second
	DefaultIdleTimeout  = 120 * time.Second
	// readHeaderTimeout bounds the request line and headers: a client that sends them slowly
	// holds a connection without reaching any handler.
	readHeaderTimeout = 10 * time.Second
)

// Check is one readiness dependency.
type Check struct {
	Name string
	Func func(ctx context.Context) error
}

// Server is an echo instance with Spanmart's middleware, error handler and operational
// endpoints (/healthz, /readyz, /metrics). Register routes on Echo, metrics on Registry.
type Server struct {
	Echo     *echo.Echo
	Registry *prometheus.Registry

	opts     ServerOptions
	log      *zap.Logger
	metrics  *httpMetrics
	mu       sync.Mutex
	checks   []Check
	draining atomic.Bool
	// admission bounds the requests in flight (admission.go); nil when unbounded.
	admission *admission
}

// Paths of the operational endpoints. Their successful requests are logged at debug level only:
// probes would otherwise drown the access log.
const (
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathMetrics = "/metrics"
	PathPprof   = "/debug/pprof/"
)

// NewServer returns a server with the operational endpoints registered.
func NewServer(o ServerOptions) *Server {
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = ShutdownBudget
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = 2 * time.Second
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	s := &Server{
		Echo:     echo.New(),
		Registry: prometheus.NewRegistry(),
		opts:     o,
		log:      o.Logger,
	}
	s.metrics = newHTTPMetrics(s.Registry, o.Service, o.Version)
	e := s.Echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	// echo logs little itself (e.g. "response already committed", a handler bug worth seeing);
	// keep it in the JSON stream.
	e.Logger.SetOutput(lineWriter{s.log.Named("echo").WithOptions(zap.WithCaller(false))})
	e.Logger.SetHeader("${short_file}:${line}")
	e.Logger.SetLevel(gommonlog.WARN)
	e.IPExtractor = echo.ExtractIPDirect()
	if o.TrustForwardedFor {
		e.IPExtractor = lastForwardedFor
	}
	e.Pre(headAsGet)
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.AdmissionWait <= 0 {
		o.AdmissionWait = DefaultAdmissionWait
	}
	if o.AdmissionWaitCustomer <= 0 {
		o.AdmissionWaitCustomer = DefaultAdmissionWaitCustomer
	}
	s.opts = o
	s.admission = newAdmission(s.Registry, s.log, o.Service, o.MaxInFlight, o.AdmissionWait, o.AdmissionWaitCustomer)
	e.Use(s.observe, s.admission.middleware, s.recoverPanics, s.limitBody)
	e.GET("/", s.info)
	e.GET(PathHealthz, s.healthz)
	e.GET(PathReadyz, s.readyz)
	e.GET(PathMetrics, echo.WrapHandler(promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{Registry: s.Registry})))
	if o.Profiling {
		e.GET(PathPprof+"*", echo.WrapHandler(http.HandlerFunc(servePprof)))
	}
	return s
}

// servePprof serves Go's profiles: the index, the CPU profile and execution trace, and the
// named profiles (heap, goroutine, ...).
func servePprof(w http.ResponseWriter, r *http.Request) {
	switch name := strings.TrimPrefix(r.URL.Path, PathPprof); name {
	case "":
		pprof.Index(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Handler(name).ServeHTTP(w, r)
	}
}

// AddCheck adds a readiness dependency.
func (s *Server) AddCheck(c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, c)
}

// Run listens as cfg says, logs one "starting" line (service, version, port, address, the
// emulator in use, and fields such as the databases), and serves until ctx is done, then shuts
// down gracefully.
func (s *Server) Run(ctx context.Context, cfg Config, fields ...zap.Field) error {
	ln, err := cfg.Listen()
	if err != nil {
		return err
	}
	s.log.Info("starting", append([]zap.Field{
		zap.String("service", cfg.Service),
		zap.String("version", cfg.Version),
		zap.Int("port", Port(ln)),
		zap.String("addr", ln.Addr().String()),
		zap.String("emulator", EmulatorHost()),
	}, fields...)...)
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done. Then it fails /readyz, stops accepting connections and
// waits for in-flight requests for at most ShutdownTimeout before closing the rest. It returns nil
// after a clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// No http.Server.WriteTimeout: it would count from the request and cut long handlers;
	// observe sets the write deadline when the response starts instead.
	hs := &http.Server{
		Handler:           s.Echo,
		ReadHeaderTimeout: min(readHeaderTimeout, s.opts.ReadTimeout),
		ReadTimeout:       s.opts.ReadTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		ErrorLog:          httpErrorLog(s.log),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("shutting down", zap.Stringer("budget", s.opts.ShutdownTimeout))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		hs.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	s.log.Info("http server stopped")
	return nil
}

// httpErrorLog is net/http's logger (accept errors, broken handlers) at WARNING.
func httpErrorLog(log *zap.Logger) *stdlog.Logger {
	l, err := zap.NewStdLogAt(log.Named("http"), zapcore.WarnLevel)
	if err != nil {
		return zap.NewStdLog(log.Named("http"))
	}
	return l
}

// info answers GET / with the service's name and version, so anyone can tell what answers on a port.
func (s *Server) info(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"service": s.opts.Service, "version": s.opts.Version})
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	if s.draining.Load() {
		return NewProblem(http.StatusServiceUnavailable, "shutting down")
	}
	s.mu.Lock()
	checks := append([]Check(nil), s.checks...)
	s.mu.Unlock()

	results := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, ch := range checks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(c.Request().Context(), s.opts.CheckTimeout)
			defer cancel()
			results[i] = ch.Func(ctx)
		})
	}
	wg.Wait()

	status := map[string]string{}
	var failed []string
	for i, ch := range checks {
		if err := results[i]; err != nil {
			status[ch.Name] = err.Error()
			failed = append(failed, ch.Name)
			continue
		}
		status[ch.Name] = "ok"
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		p := NewProblem(http.StatusServiceUnavailable, "not ready: "+strings.Join(failed, ", "))
		p.Extensions = map[string]any{"checks": status}
		return p
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ok", "checks": status})
}

// handleError is the one echo HTTPErrorHandler: every error becomes problem+json.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		Logger(c.Request().Context()).Warn("error after response was committed", zap.Error(err))
		return
	}
	cause := err
	if bp := bodyProblem(c); bp != nil {
		// The handler failed because the client's body did: whatever it made of the read
		// error (often a plain 500), the answer is the body's problem.
		cause = bp
	}
	p := problemFor(cause, s.opts.ErrorMapper)
	if p.Status >= 500 && errors.Is(c.Request().Context().Err(), context.Canceled) {
		// The client went away and the handler's calls failed with it (a Spanner error does
		// not always wrap context.Canceled): not the server's fault.
		p = problemFor(context.Canceled, nil)
	}
	p.Instance = c.Request().URL.Path
	if id := RequestID(c.Request().Context()); id != "" {
		if p.Extensions == nil {
			p.Extensions = map[string]any{}
		}
		p.Extensions["request_id"] = id
	}
	c.Set(ctxKeyError, err)
	if c.Request().Method == http.MethodHead {
		c.NoContent(p.Status)
		return
	}
	c.Response().Header().Set(echo.HeaderContentType, ContentTypeProblem)
	if werr := c.JSON(p.Status, p); werr != nil {
		Logger(c.Request().Context()).Warn("write problem response", zap.Error(werr))
	}
}
