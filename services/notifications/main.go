// Command notifications sends customer e-mails in reaction to order.* and payment.pending
// events, each at most once per (event, template).
//
// Configuration is environment variables only (config.go); run (run.go) wires the service
// together and serves until Cloud Run's SIGTERM.
package main

import "github.com/spanmart/spanmart/pkg/platform"

func main() { platform.Main(serviceName, loadConfig, run) }
