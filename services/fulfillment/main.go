// Command fulfillment owns inventory (on-hand stock, reservations) and shipments and emits
// inventory.* and shipment.* events: it consumes orders' order.created, order.confirmed and
// order.cancelled, serves stock, reservations and shipments, and takes the warehouse's actions
// (ship, fail) over HTTP. In the dev stack a simulated carrier in the process can ship pending
// shipments itself (CARRIER_SIMULATE_AFTER). See README.md.
//
// Configuration is environment variables only (config.go); run (run.go) wires the service
// together and serves until Cloud Run's SIGTERM.
package main

import "github.com/spanmart/spanmart/pkg/platform"

func main() { platform.Main(serviceName, loadConfig, run) }
