// Package faults holds failpoints for failure drills: named places in the code where a process can be
// made to die on purpose, to prove that nothing is lost or duplicated when it does. They are off in
// production: a failpoint fires only when its name is listed in the SPANMART_FAULTS environment
// variable (comma-separated), which nothing but the drills (package e2e) and the demo set.
//
// Hit(name) makes the process exit at once with status 137, what a shell reports for SIGKILL: no
// deferred function runs, no buffer is flushed, no graceful shutdown happens, which is what a crash,
// an OOM kill or a lost machine looks like to the rest of the system. The environment is read once;
// with SPANMART_FAULTS unset a Hit is one sync.Once check and a nil-map lookup.
//
// The failpoints the drills use (e2e/drills_test.go), and where they are called:
//
//   - OrdersBeforeCommit ("orders.before_commit"): services/orders/internal/store, Store.placeOnce,
//     inside the read-write transaction function of POST /v1/orders, after the order, its lines,
//     its timeline, the order.created outbox row and the idempotency key have been buffered, just
//     before the function returns (so before the commit): neither the order nor its event exists.
//   - OrdersAfterCommit ("orders.after_commit"): the same function, right after the transaction
//     committed a new order (not a replayed idempotency key), before the response is written or the
//     relay nudged: the client sees a broken connection although the order and its event exist.
//   - RelayAfterEnqueue ("relay.after_enqueue"): relay/run.go, the relay core's BeforeMark hook,
//     called after a batch's tasks were created and before the batch is marked published, when the
//     batch created at least one task: the next relay re-enqueues the same rows, gets
//     ALREADY_EXISTS, and consumers de-duplicate whatever is delivered twice.
//   - GatewayAfterProviderCall ("gateway.after_provider_call"):
//     services/gateway-abstraction/internal/app, Service.Resume, after the provider answered a
//     call and before the answer is recorded: the provider acted, the gateway does not know it; the
//     redelivery or the sweep calls again with the same idempotency key.
//   - NotificationsAfterSend ("notifications.after_send"): services/notifications/internal/app,
//     Service.send, after the mail server accepted a message and before the notification is marked
//     SENT: the customer has the e-mail, the service does not know it; the redelivery or the sweep
//     sends it again with the same Message-ID.
package faults

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// EnvVar lists the failpoints that fire, comma-separated.
const EnvVar = "SPANMART_FAULTS"

// ExitCode is the status a failpoint exits with (128 + SIGKILL, as a shell reports a kill -9).
const ExitCode = 137

// The failpoints of the drills.
const (
	OrdersBeforeCommit = "orders.before_commit"
	OrdersAfterCommit  = "orders.after_commit"
	RelayAfterEnqueue  = "relay.after_enqueue"

	GatewayAfterProviderCall = "gateway.after_provider_call"

	NotificationsAfterSend = "notifications.after_send"
)

var (
	once   sync.Once
	active map[string]bool
)

func load() {
	for _, name := range strings.Split(os.Getenv(EnvVar), ",") {
		if name = strings.TrimSpace(name); name != "" {
			if active == nil {
				active = map[string]bool{}
			}
			active[name] = true
		}
	}
}

// Enabled reports whether the failpoint name is listed in SPANMART_FAULTS.
func Enabled(name string) bool {
	once.Do(load)
	return active[name]
}

// Hit kills the process (exit status 137, no deferred cleanup) if the failpoint name is enabled, and
// does nothing otherwise.
func Hit(name string) {
	if !Enabled(name) {
		return
	}
	fmt.Fprintf(os.Stderr, "fault %s: exiting\n", name)
	os.Exit(ExitCode)
}
