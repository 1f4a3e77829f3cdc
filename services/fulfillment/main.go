// Command fulfillment owns inventory (on-hand stock, reservations) and shipments and emits
// inventory.* and shipment.* events.
//
// Configuration is environment variables only (config.go); run (run.go) wires the service
// together and serves until Cloud Run's SIGTERM.
package main

import "github.com/spanmart/spanmart/pkg/platform"

func main() { platform.Main(serviceName, loadConfig, run) }
