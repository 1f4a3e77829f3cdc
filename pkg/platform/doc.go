// Package platform is the runtime every Spanmart binary shares: configuration from environment
// variables, a zap logger that writes Cloud Logging's structured JSON, an echo server with the
// middleware a Cloud Run service needs and a Spanner client constructor that works unchanged
// against Cloud Spanner and an emulator. Business code sees little of it: handlers return errors
// and log through Logger(ctx).
//
// # Configuration
//
// Env reads variables and collects every problem, so a bad deployment is fixed in one round trip
// (`missing SPANNER_DATABASE; invalid PORT "x": not an integer`). LoadConfig reads the variables
// all binaries share:
//
//	PORT                  listen port, default 8080 (0 picks a free one)
//	LOG_LEVEL             debug, info (default), warn or error
//	GOOGLE_CLOUD_PROJECT  project of trace ids in logs; default the project of the database
//	MAX_BODY_BYTES        request body limit, default 1048576
//	K_SERVICE, K_REVISION set by Cloud Run; default the binary's name and its build version
//
// SPANNER_EMULATOR_HOST is read by the Spanner client library itself.
//
// # Logging
//
// NewLogger writes severity, message, time, serviceContext and
// logging.googleapis.com/sourceLocation. Inside a request, Logger(ctx) returns a logger that also
// carries request_id and the logging.googleapis.com/trace, spanId and trace_sampled fields taken
// from traceparent or X-Cloud-Trace-Context, so Cloud Logging groups a request's lines under its
// trace.
//
// # Server
//
// NewServer returns an echo instance with, outermost first: request id (X-Request-Id honoured or
// generated, echoed in the response), trace and request logger, metrics and one access log line in
// Cloud Logging's httpRequest shape; panic recovery; the body limit. One error handler turns every
// error into RFC 9457 problem+json: *Problem as given, *echo.HTTPError with its code, an oversized
// body as 413, domain errors through ServerOptions.ErrorMapper, anything else as a 500 whose
// detail is hidden. A body the client cut short or sent too slowly is a 400 or 408 however the
// handler wrapped the read error, and a failure after the client went away is a 499: neither is
// the server's fault. Only 5xx are logged as errors; the successes of the operational endpoints
// and of routes behind Quiet (deliveries, nudges) at debug level. Every GET route answers HEAD. The logged
// client address is the connection's, or on Cloud Run the one Google's front end appended to
// X-Forwarded-For. ReadTimeout bounds receiving a request and WriteTimeout sending its response
// (from its first byte, so long handlers are not cut); both have defaults in ServerOptions.
// RequireJSON and DecodeJSONStrict give handlers a request decoder that refuses what
// encoding/json lets through (duplicate keys, field names in another case, invalid UTF-8) and
// words its errors by JSON path, not Go type. It serves / (service name and version),
// /healthz (liveness, no dependencies), /readyz (every Check, e.g. SpannerCheck; 503 naming the failed ones) and /metrics
// (a per-server Prometheus registry). Serve shuts down gracefully when its context ends.
//
// A binary's main is one line, platform.Main(serviceName, loadConfig, run): Main reads the
// configuration (exit 2 naming every problem), builds the logger and runs until SIGTERM. run wires
// the binary together:
//
//	client, err := platform.NewSpannerClient(ctx, cfg.Database.String())
//	...
//	defer client.Close() // after the server has drained
//	srv := platform.NewServer(cfg.ServerOptions(log))
//	srv.AddCheck(platform.SpannerCheck("spanner", client))
//	httpapi.Register(srv.Echo, ...) // the service's own routes
//	return srv.Run(ctx, cfg.Config, zap.String("database", cfg.Database.String()))
//
// # Calling other services
//
// A Cloud Run service that requires authentication accepts a Google ID token whose audience is
// its URL. IDTokenSource gets such tokens for the caller's own service account from the
// metadata server and caches each until five minutes before it expires; Client(audience)
// attaches one to every request:
//
//	tokens := platform.NewIDTokenSource(nil)
//	orders := tokens.Client(cfg.OrdersURL)
//
// Locally, GCE_METADATA_HOST set to the Cloud Tasks emulator's HTTP address makes the same code
// get tokens the emulator signs (emulator/tasksemu/README.md).
//
// # Verifying ID tokens
//
// IDTokenVerifier is the one verifier of OpenID Connect ID tokens in the repository: signature by
// the issuer's JWKS (discovered, cached, rotated), issuer, audience, expiry, lifetime and subject.
// pkg/outboxlib builds the event consumers' and operators' checks of Google tokens on it (adding
// the accounts it allows); orders verifies its customers' Identity Platform tokens with it, and the
// console the ES256 assertions Identity-Aware Proxy signs (VerifyToken, Algorithms).
package platform
