// Command notifications sends the customer e-mails of an order: confirmed, how to pay a konbini
// slip or bank transfer, shipped, cancelled, refunded. It consumes order.* and payment.* events
// (POST /events), records each e-mail as a notification in the consumer's transaction, and sends
// it over SMTP after the commit, at most once per (event, template) but for the crash window
// described in internal/app. README.md lists the endpoints, events, variables and failure
// behaviour.
//
// Configuration is environment variables only (config.go); run (run.go) wires the service
// together and serves until Cloud Run's SIGTERM.
package main

import "github.com/spanmart/spanmart/pkg/platform"

func main() { platform.Main(serviceName, loadConfig, run) }
