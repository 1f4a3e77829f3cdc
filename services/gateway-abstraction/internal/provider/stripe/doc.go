// Package stripe is the gateway's card provider: provider.Provider over Stripe's PaymentIntents
// API, through the official client github.com/stripe/stripe-go/v82 (never raw HTTP). Locally
// Config.BaseURL points the client at the paysim sandbox (emulator/paysim), which speaks the same
// API; in production BaseURL is empty and the client talks to api.stripe.com.
//
// A card payment is one PaymentIntent. Authorize creates and confirms it in one call with
// capture_method=manual, so that the money is held (requires_capture) until Capture takes it or
// Void cancels it; Stripe lapses an uncaptured authorization after 7 days by canceling the
// PaymentIntent with cancellation_reason "automatic". Refund creates a Refund of the captured
// PaymentIntent (POST /v1/refunds with payment_intent); the PaymentIntent itself stays
// succeeded, so a refund is read from the Refund, never from the PaymentIntent. Every call that
// changes something sends the operation's idempotency key as Stripe's Idempotency-Key, so a call
// retried after a lost answer is answered with the first call's result and never acts twice. Spanmart's payment id, order id
// and customer id travel as PaymentIntent metadata (spanmart_payment_id, order_id, customer_id),
// which is how a webhook names the payment it is about.
//
// # Statuses
//
// A PaymentIntent's status (and, for some, its last_payment_error or cancellation_reason) is
// read as a payment.Status the same way whether it comes from an API answer or a webhook:
//
//	requires_payment_method, last_payment_error set  FAILED, Reason from the error (below)
//	requires_payment_method, no last_payment_error   REQUESTED (not yet confirmed)
//	requires_confirmation                            REQUESTED (not yet confirmed)
//	requires_action                                  REQUESTED (the customer must complete 3-D Secure)
//	processing                                       REQUESTED (Stripe has not answered yet)
//	requires_capture                                 AUTHORIZED
//	succeeded                                        CAPTURED
//	canceled, cancellation_reason automatic|expired  EXPIRED, Reason expired (the authorization lapsed)
//	canceled, any other reason or none               VOIDED
//	anything else                                    an error: Temporary, provider_unavailable
//
// A refusal's Reason comes from the card error's decline_code and code: insufficient_funds is
// insufficient_funds; authentication_required and payment_intent_authentication_failure (3-D
// Secure failed) are authentication_failed; every other decline is declined. A card decline
// answers Authorize with an Outcome (FAILED), not an error.
//
// A Refund's status reads:
//
//	succeeded                            REFUNDED
//	failed, canceled                     REFUND_FAILED, Reason declined
//	pending, requires_action             not finished: Refund reads the Refund again by its id (a
//	                                     retry under the same key would replay the first answer),
//	                                     and while it stays unfinished answers a Temporary error,
//	                                     so the gateway asks again later; its webhook may come first
//	anything else                        an error: Temporary, provider_unavailable
//
// # Operations on a payment in another state
//
// Stripe answers a capture or cancel the PaymentIntent's status does not allow with 400
// payment_intent_unexpected_state, carrying the PaymentIntent, and a refund of a charge with
// nothing left to refund with 400 charge_already_refunded. The adapter reads them:
//
//	Capture of a lapsed authorization   Outcome CAPTURE_FAILED, Reason expired (the provider refuses for good)
//	Capture of a captured payment       Outcome CAPTURED (an earlier capture took the money)
//	Void of a canceled payment          Outcome VOIDED (Reason expired when it had lapsed: the hold is gone either way)
//	Refund of a refunded payment        Outcome REFUNDED (400 charge_already_refunded: an earlier refund gave it all back)
//	anything else                       *provider.Error, not Temporary, Reason invalid_request
//
// # Errors
//
// Failures are *provider.Error with the HTTP status Stripe answered with (0 when none came back):
//
//	no answer (connection refused or reset, timeout, canceled context),
//	HTTP 5xx, 429 (rate limit, lock_timeout), 409 (idempotency_key_in_use:
//	a request with the same key is still running), type api_error,
//	a 2xx, 5xx, 408, 409 or 429 answer that is not Stripe's JSON
//	(a load balancer's 502 page)                                         Temporary, provider_unavailable
//	invalid_request_error, idempotency_error (same key, other parameters),
//	authentication errors (a wrong API key), any other 4xx               not Temporary, invalid_request
//	404 resource_missing                                                 not Temporary, invalid_request, wraps provider.ErrNotFound
//
// Nothing of Stripe's leaves the package except in error messages, and those carry only the
// error's type, code, decline code, message and request id: stripe-go's own error text is the
// whole error object, PaymentIntent and client_secret included, which must not reach a log.
//
// # Webhooks
//
// ParseWebhook verifies Stripe-Signature with stripe-go's webhook package, and the signature's
// age against the now it is given (webhook.ConstructEvent can only measure age against the wall
// clock, so the adapter checks the signed timestamp itself and lets stripe-go check the HMAC with
// its tolerance switched off). Events about a PaymentIntent that announce a new state carry an
// Outcome read from the event's PaymentIntent snapshot with the mapping above:
// payment_intent.amount_capturable_updated (AUTHORIZED), .payment_failed (FAILED), .succeeded
// (CAPTURED), .canceled (VOIDED or EXPIRED), .requires_action (REQUESTED). Refunds move a payment
// by two events: charge.refunded once the whole charge is refunded (REFUNDED; a partial refund
// moves nothing), and refund.created, .updated and .failed of a refund the gateway made (its
// metadata names the payment) with the Refund table above (a pending refund moves nothing yet; a
// refund made elsewhere, the Dashboard say, may be a part of the payment and moves nothing).
// Every other event (payment_intent.created and .processing, the other charge.* events, ...) is
// returned with Outcome Status "": acknowledged, recorded, ignored. Stripe sends only the events
// the webhook endpoint subscribes to: for refunds to reach the gateway by webhook as well as by
// the answer, subscribe it to refund.* (or charge.refunded) besides payment_intent.*.
package stripe
