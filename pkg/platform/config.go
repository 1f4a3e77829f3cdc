package platform

import (
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// DefaultMaxBodyBytes is the request body limit when MAX_BODY_BYTES is unset.
const DefaultMaxBodyBytes = 1 << 20

// Config is the part of a binary's configuration every Spanmart binary shares.
type Config struct {
	Service      string // K_SERVICE (set by Cloud Run), else the binary's own name
	Version      string // K_REVISION (set by Cloud Run), else the module version, else "dev"
	Port         int    // PORT, default 8080; 0 picks a free port
	LogLevel     string // LOG_LEVEL: debug, info, warn or error
	Project      string // GOOGLE_CLOUD_PROJECT, else the project of the service's database
	MaxBodyBytes int64  // MAX_BODY_BYTES, default 1 MiB
	// Profiling serves Go's profiles under /debug/pprof/ (PPROF_ENABLED, default false): for
	// measuring on a local stack (the benchmark turns it on), never on a public service.
	Profiling bool
	// CloudRun is whether the binary runs on Cloud Run (K_REVISION set), behind Google's front
	// end: only then is X-Forwarded-For trusted for the client's address.
	CloudRun bool
	// MaxInFlight (MAX_IN_FLIGHT, default 8; 0 for no bound) is how many requests the server
	// works on at once, as Cloud Run's --concurrency bounds an instance: cloudbuild.yaml sets both
	// to one number. AdmissionWait (ADMISSION_WAIT, default 10s) is how long a request past it
	// waits for a slot before it is refused with 503 and Retry-After, AdmissionWaitCustomer
	// (ADMISSION_WAIT_CUSTOMER, default 25ms) how long one bringing new work does (admission.go).
	MaxInFlight           int
	AdmissionWait         time.Duration
	AdmissionWaitCustomer time.Duration

	// Listener, when set, is used instead of listening on Port. Tests pass one; it never comes
	// from the environment.
	Listener net.Listener
	// ListenFD (SPANMART_LISTEN_FD), when set, is an open file descriptor of a listening socket
	// the parent bound and passed down (the e2e harness does: a port it picked and bound itself
	// cannot be taken by another process before the child listens, as a port it only picked
	// could). Unset on Cloud Run.
	ListenFD int
}

// LoadConfig reads the shared variables. service is the binary's name and defaultProject the
// project of its (first) database, used for trace ids when GOOGLE_CLOUD_PROJECT is unset.
func LoadConfig(env *Env, service, defaultProject string) Config {
	return Config{
		Service:               env.String("K_SERVICE", service),
		Version:               env.String("K_REVISION", buildVersion()),
		Port:                  env.Int("PORT", 8080, 0, 65535),
		LogLevel:              env.Enum("LOG_LEVEL", "info", "debug", "info", "warn", "error"),
		Project:               env.String("GOOGLE_CLOUD_PROJECT", defaultProject),
		MaxBodyBytes:          env.Int64("MAX_BODY_BYTES", DefaultMaxBodyBytes, 1, 1<<40),
		Profiling:             env.Bool("PPROF_ENABLED", false),
		CloudRun:              env.Lookup("K_REVISION") != "",
		ListenFD:              env.Int("SPANMART_LISTEN_FD", 0, 0, 1<<16),
		MaxInFlight:           env.Int("MAX_IN_FLIGHT", DefaultMaxInFlight, 0, 1000),
		AdmissionWait:         env.Duration("ADMISSION_WAIT", DefaultAdmissionWait, time.Millisecond, 10*time.Minute),
		AdmissionWaitCustomer: env.Duration("ADMISSION_WAIT_CUSTOMER", DefaultAdmissionWaitCustomer, time.Millisecond, time.Minute),
	}
}

// ServiceConfig is the configuration of a service that owns one database: Config plus
// SPANNER_DATABASE. A service's own config type embeds it and adds what only it needs.
type ServiceConfig struct {
	Config
	Database DatabaseName // SPANNER_DATABASE, required
}

// LoadServiceConfig reads the shared variables and SPANNER_DATABASE; problems go to env.Err().
func LoadServiceConfig(env *Env, service string) ServiceConfig {
	db := env.Database("SPANNER_DATABASE")
	return ServiceConfig{Config: LoadConfig(env, service, db.Project), Database: db}
}

// LogOptions returns the logger settings of c.
func (c Config) LogOptions() LogOptions {
	return LogOptions{Service: c.Service, Version: c.Version, Level: c.LogLevel}
}

// ServerOptions returns the server settings of c with log as the base logger.
func (c Config) ServerOptions(log *zap.Logger) ServerOptions {
	inFlight := c.MaxInFlight
	if inFlight == 0 {
		inFlight = -1 // MAX_IN_FLIGHT=0: no bound, which is ServerOptions' -1
	}
	return ServerOptions{
		Service:      c.Service,
		Version:      c.Version,
		Project:      c.Project,
		MaxBodyBytes: c.MaxBodyBytes,
		Profiling:    c.Profiling,
		Logger:       log,

		TrustForwardedFor:     c.CloudRun,
		MaxInFlight:           inFlight,
		AdmissionWait:         c.AdmissionWait,
		AdmissionWaitCustomer: c.AdmissionWaitCustomer,
	}
}

// Listen returns c.Listener or a new listener on c.Port (all interfaces, as Cloud Run expects).
func (c Config) Listen() (net.Listener, error) {
	if c.Listener != nil {
		return c.Listener, nil
	}
	if c.ListenFD > 0 {
		f := os.NewFile(uintptr(c.ListenFD), "inherited listener")
		ln, err := net.FileListener(f)
		f.Close() // FileListener holds a duplicate
		if err != nil {
			return nil, fmt.Errorf("listen on the inherited descriptor %d (SPANMART_LISTEN_FD): %w", c.ListenFD, err)
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(c.Port)))
	if err != nil {
		return nil, fmt.Errorf("listen on port %d: %w", c.Port, err)
	}
	return ln, nil
}

// Port returns the TCP port ln listens on (useful with PORT=0), 0 for non-TCP listeners.
func Port(ln net.Listener) int {
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// ShutdownBudget is how long a graceful shutdown may take: Cloud Run sends SIGKILL 10 s after
// SIGTERM, and closing the Spanner clients needs the rest.
const ShutdownBudget = 8 * time.Second

func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return s.Value[:12]
		}
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	return "dev"
}
