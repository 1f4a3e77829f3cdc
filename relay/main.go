// Command relay delivers the transactional outboxes of the service databases (RELAY_SOURCES) to
// Cloud Tasks: one task per (event, subscriber), then marks the rows published. The work is done by
// package github.com/spanmart/spanmart/pkg/outboxlib/relay; this command wires it to the
// environment and HTTP.
//
// Configuration is environment variables only (config.go): RELAY_SOURCES, RELAY_SERVICE_ACCOUNT
// (the e-mail of the tasks' OIDC tokens), CLOUD_TASKS_EMULATOR_HOST (locally), RELAY_ROUTES (a
// routes file; default the embedded routes.yaml) and the variables the routes file references
// (TASKS_LOCATION, ORDERS_URL, FULFILLMENT_URL, GATEWAY_URL, NOTIFICATIONS_URL). run (run.go) serves
// until Cloud Run's SIGTERM, then releases the shard leases. Besides /healthz, /readyz and /metrics:
//
//	POST /nudge                                  wake the relay after a commit (204)
//	GET  /v1/outbox                              per source: pending, oldest pending age, quarantined, shard leases
//	POST /v1/outbox/{source}/events/{id}/replay  {"reason": "..."}: re-queue a quarantined or published event (202)
//	GET  /v1/ledger                              the delivery ledger's missing deliveries per source
//	POST /v1/ledger/audit                        an audit pass now (the relay runs one every RELAY_LEDGER_INTERVAL)
//	POST /v1/ledger/{source}/events/{id}/replay  {"reason": "..."}: replay a missing delivery (202)
package main

import "github.com/spanmart/spanmart/pkg/platform"

func main() { platform.Main(serviceName, loadConfig, run) }
