// Package platform is the runtime every Spanmart binary shares: configuration from environment
// variables, a zap logger that writes Cloud Logging's structured JSON, an echo server with the
// middleware a Cloud Run service needs (request ids, trace correlation, panic recovery, access log,
// body limit, RFC 9457 problem responses, Prometheus metrics, health and readiness endpoints,
// graceful shutdown) and a Spanner client constructor that works unchanged against Cloud Spanner
// and an emulator.
//
// A service's main wires it together:
//
//	cfg, err := loadConfig(os.Getenv)          // built on platform.Env and platform.LoadConfig
//	log, err := platform.NewLogger(os.Stdout, cfg.Config.LogOptions())
//	client, err := platform.NewSpannerClient(ctx, cfg.Database.String())
//	srv := platform.NewServer(cfg.Config.ServerOptions(log))
//	srv.AddCheck(platform.SpannerCheck("spanner", client))
//	httpapi.Register(srv.Echo, ...)
//	return srv.Run(ctx, cfg.Config)            // returns after a graceful shutdown
//
// Handlers get their request-scoped logger with Logger(ctx) and return errors; one error handler
// turns them into problem+json.
package platform
