// Command console is the operators' web console: it reads the services' admin APIs (never their
// databases) and shows the outboxes, the failed messages, an order's trace across the services and
// the stuck orders, acting as its own account on behalf of the operator it verified. See README.md.
package main

import "github.com/spanmart/spanmart/pkg/platform"

func main() { platform.Main(serviceName, loadConfig, run) }
