// Command orders serves the public order API: it is the sole owner and writer of the order
// state machine and of the order.* events, which it appends to its outbox.
//
// Configuration is environment variables only (config.go); run (run.go) wires the service
// together and serves until Cloud Run's SIGTERM.
package main

import "github.com/spanmart/spanmart/pkg/platform"

func main() { platform.Main(serviceName, loadConfig, run) }
