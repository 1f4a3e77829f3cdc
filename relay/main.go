// Command relay delivers the transactional outboxes of the service databases (RELAY_SOURCES) to
// Cloud Tasks: one task per (event, subscriber), then marks the rows published.
//
// Configuration is environment variables only (config.go); run (run.go) wires the service
// together and serves until Cloud Run's SIGTERM.
package main

import "github.com/spanmart/spanmart/pkg/platform"

func main() { platform.Main(serviceName, loadConfig, run) }
