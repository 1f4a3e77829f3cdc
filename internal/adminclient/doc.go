// Package adminclient is the typed client of Spanmart's operator APIs, the one the web console
// (services/console) and the spanmartctl command (tools/spanmartctl) are built on. It reads and
// acts through the services' HTTP APIs, never their databases:
//
//   - the relay: the outboxes' status, the quarantined events, the events of one aggregate, an
//     outbox replay, the delivery ledger (missing deliveries, an audit pass, a replay);
//   - each consumer (orders, fulfillment, gateway-abstraction, notifications, from pkg/outboxlib):
//     its status, its dead letters (the list, one of them, a replay) and which events it processed;
//   - orders: the stuck orders, the reconciliation and the audit, and the public read of an order
//     (with its timeline);
//   - the gateway: the payments of an order, its sweep; notifications: the notifications of an
//     order, its sweep; fulfillment: the reservation and the shipments of an order.
//
// The answers of orders, fulfillment, the gateway and notifications are the services' own wire
// types, from the packages their HTTP APIs encode them with (services/<svc>/api); the relay's and
// the consumers' answers are the outbox pipeline's, from pkg/outboxlib/outboxapi, which
// pkg/outboxlib and its relay encode them with. Order, Reservation, Payment, OutboxStatus,
// DeadLetter, ... are aliases of those, so the client cannot lack a field a server writes.
//
// Two calls assemble answers from several services: Overview (every outbox and every consumer at
// once, with the problems they show) and Trace (an order's events across the services, hop by
// hop, with the latencies of the relay and of the deliveries). A service that does not answer is
// reported in their result (a Gap) rather than failing the whole call.
//
// # Configuration and authentication
//
// A Client is configured with the base URL of each service by its roster name
// (internal/topology: topology.Orders, ..., topology.Relay) and a Tokens source. Every request
// carries Authorization: Bearer with a Google ID token whose audience is the called service's base
// URL, as the operator endpoints require (the contract of issue 13: a token of an account in the
// service's ADMIN_ALLOWED_EMAILS, 401 without a valid token, 403 for another account). Two sources
// are provided: NewMetadataTokens, the metadata server's tokens (pkg/platform.IDTokenSource: a
// process's own account in production; on the dev stack the Cloud Tasks emulator, which mints a
// token for any account), and FixedToken, one pasted token (gcloud auth print-identity-token),
// which suits one audience only.
//
// A delegate (the console, an account in the services' ADMIN_DELEGATE_EMAILS) names the operator
// it acts for with Config.OnBehalfOf or, per request, WithOnBehalfOf: the header
// X-Spanmart-On-Behalf-Of, which the services record as "operator via delegate" on a replay.
//
// # Errors
//
// An answer other than 2xx is an *Error with the HTTP status and the problem+json detail; it
// matches ErrUnauthenticated (401), ErrForbidden (403), ErrNotFound (404) and ErrConflict (409)
// with errors.Is. A service without a configured URL is ErrNoURL; a name that is not in the roster
// (or not a consumer, where one is needed) is ErrUnknownService; a replay without a reason is
// ErrNoReason, refused before anything is sent.
//
// Package adminclienttest fakes every service's operator API (the JSON shapes the services write)
// for the tests of programs built on the client.
package adminclient
