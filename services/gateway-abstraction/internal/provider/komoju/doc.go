// Package komoju is the gateway's provider of konbini, bank transfer and PayPay (wallet)
// payments: provider.Provider over KOMOJU's REST API (https://komoju.com/api/v1), spoken with
// net/http and JSON, authenticated with HTTP Basic (the secret key as user name). Locally
// Config.BaseURL points at the paysim sandbox (emulator/paysim), which speaks the same API.
//
// A payment is one KOMOJU payment. Authorize creates it with its payment_details: for konbini
// the store is the AuthorizeRequest's Instrument and the customer's Email is required (KOMOJU
// mails the slip); bank transfer needs the Email too; PayPay is created with capture false, so
// that the amount is held until Capture takes it or Void releases it. Refund gives the money of a
// captured PayPay payment or a paid slip back (POST /api/v1/payments/{id}/refund): PayPay's at
// once, a slip's later (below, "Refunds paid out later"). Spanmart's ids travel as
// external_order_num (the payment id) and metadata (payment_id, order_id, customer_id), which is
// how a webhook names the payment it is about. Every call that changes something sends the
// operation's idempotency key as X-KOMOJU-IDEMPOTENCY, so a call retried after a lost answer is
// answered with the first call's result and never acts twice (KOMOJU allows 100 characters; a
// longer key is sent as its SHA-256 in hex).
//
// # Statuses
//
// A KOMOJU payment's status reads as a payment.Status by its payment type, the same way in an
// API answer and in a webhook. KOMOJU's "authorized" of a slip means the slip is issued and
// KOMOJU waits for the customer's cash; its "captured" of a slip means the customer paid, so the
// money is taken and held by the merchant, which is what Spanmart calls AUTHORIZED for a slip:
//
//	KOMOJU      konbini, bank_transfer          paypay
//	pending     REQUESTED                       REQUESTED (the customer must approve in the app)
//	authorized  PENDING, with the Slip          AUTHORIZED (the amount is held)
//	captured    AUTHORIZED (the slip was paid)  CAPTURED
//	 with a refund request pending              REFUND_PENDING (both)
//	 whose last refund request was rejected     REFUND_FAILED, Reason declined (both)
//	refunded    REFUNDED                        REFUNDED
//	cancelled   VOIDED                          VOIDED
//	expired     EXPIRED, Reason expired         EXPIRED, Reason expired (the hold lapsed)
//	failed      FAILED, Reason below            FAILED, Reason below
//	other       an error: Temporary, provider_unavailable
//
// A failed payment's Reason is insufficient_funds when KOMOJU says insufficient_funds
// (failure_reason on the payment, or the event's reason), declined otherwise. A refusal answers
// Authorize with an Outcome (FAILED), not an error.
//
// The Slip of a PENDING payment carries the store, the receipt number (PaymentCode) and the
// confirmation code (konbini), the bank account (bank transfer), the instructions URL and the
// payment_deadline as ExpiresAt.
//
// # Capture, Void and Refund
//
// provider.Operation does not say the payment's method, and what Capture, Void and Refund must do
// depends on it, so each first reads the payment (a GET, which changes nothing) and then acts:
//
//	Capture  slip paid (captured)            CAPTURED, and KOMOJU is not asked to capture: KOMOJU
//	                                         captured the slip when the customer paid, and has
//	                                         no capture of a slip (it answers not_capturable)
//	         paypay authorized               POST capture → CAPTURED
//	         paypay captured                 CAPTURED (an earlier capture took the money)
//	         expired                         CAPTURE_FAILED, Reason expired (KOMOJU will never capture it)
//	         anything else (an unpaid slip)  *provider.Error, not Temporary, invalid_request
//	Void     pending, authorized (unpaid     POST cancel → VOIDED
//	         slip, paypay hold)
//	         slip paid (captured)            AUTHORIZED, without acting: the money is taken, there
//	                                         is no hold to release; the gateway refunds it instead
//	         cancelled                       VOIDED
//	         expired                         VOIDED, Reason expired (nothing is held any more)
//	         anything else (paypay captured, *provider.Error, not Temporary, invalid_request
//	         refunded, failed)
//	Refund   captured (paypay, paid slip)    POST refund (amount: AmountMinor, or all that is
//	                                         left) → REFUNDED, or REFUND_PENDING (a slip: KOMOJU
//	                                         accepted it as a refund request); a payment KOMOJU
//	                                         leaves captured (a partial refund) is
//	                                         *provider.Error, invalid_request
//	         captured, a refund request      REFUND_PENDING, without acting: an earlier request
//	         pending                         (a lost answer's) is paid out later, a second one
//	                                         would refund twice
//	         refunded                        REFUNDED (an earlier refund gave it all back)
//	         anything else                   *provider.Error, not Temporary, invalid_request
//
// When the POST is refused as not allowed (422: the payment changed in between, an expiry say),
// the payment is read again and the table applied once more, without acting.
//
// # Refunds paid out later
//
// KOMOJU cannot give a konbini or bank transfer payment's cash back the way it came: it pays
// the customer by bank transfer, by hand, a business day or two after the request, through a
// refund request (status pending, then completed or rejected, say for a wrong account). Until
// the request is completed the payment stays captured, with the request in its refund_requests;
// completed in full, the payment is refunded (payment.refund.created, payment.refunded). So a
// captured payment with a pending refund request reads REFUND_PENDING (money still held), and
// one whose last request was rejected REFUND_FAILED (declined); a completed request that left
// the payment captured (a part) reads as captured. The refund request's own event,
// refund_request.updated, carries the request, not the payment: pending reads REFUND_PENDING,
// rejected REFUND_FAILED (declined; no payment event follows a rejection), completed moves
// nothing (payment.refunded follows a refund of everything). KOMOJU takes a slip's refund on POST
// /api/v1/payments/{id}/refund_request with the customer's bank account, which Spanmart does not
// collect yet; the adapter asks POST .../refund, which the sandbox answers with the same refund
// request (emulator/paysim's README, "Known differences from KOMOJU").
//
// # Errors
//
// Failures are *provider.Error with the HTTP status KOMOJU answered with (0 when none came back):
//
//	no answer (connection refused or reset, timeout, canceled context),
//	an answer that is not KOMOJU's JSON, HTTP 5xx, 429, 409 (a request
//	with the same idempotency key is still running)                     Temporary, provider_unavailable
//	other 4xx (401 a wrong key, 400 bad_request, 422 missing or
//	invalid parameters, an idempotency key reused for another request)   not Temporary, invalid_request
//	404 not_found                                                        not Temporary, invalid_request, wraps provider.ErrNotFound
//
// Nothing of KOMOJU's leaves the package except in error messages (HTTP status, error code and
// message) and as Notification.EventType, which the contract asks for.
//
// # Webhooks
//
// ParseWebhook verifies X-Komoju-Signature, the hex HMAC-SHA256 of the raw body keyed with the
// webhook secret, in constant time. KOMOJU signs no timestamp, so there is no age to check: a
// replayed delivery verifies, and is absorbed by the gateway's de-duplication of events by id
// (ProviderEvents). The payment id comes from metadata.payment_id, else external_order_num.
// payment.authorized, .captured, .failed, .cancelled, .expired, .refunded and .updated carry
// the Outcome of the event's payment snapshot read with the table above; refund_request.updated
// the Outcome of its refund request (above), with only KOMOJU's payment id to find the payment
// by; payment.refund.created (a refund of a part leaves the payment captured; payment.refunded
// follows a full one), ping and every other event carry Status "" (acknowledged, recorded,
// ignored).
package komoju
