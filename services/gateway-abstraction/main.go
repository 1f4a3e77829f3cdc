// Command gateway-abstraction hides the payment providers and methods behind one internal
// contract and turns provider webhooks into payment.* events. Its database is "payments".
//
// Configuration is environment variables only (config.go); run (run.go) wires the service
// together and serves until Cloud Run's SIGTERM.
package main

import "github.com/spanmart/spanmart/pkg/platform"

func main() { platform.Main(serviceName, loadConfig, run) }
