package paysim

import (
	"net/http"
	"slices"
	"time"
)

// status is a PaymentIntent status, spelled as Stripe spells it.
type status string

const (
	statusRequiresPaymentMethod status = "requires_payment_method"
	statusRequiresConfirmation  status = "requires_confirmation"
	statusRequiresAction        status = "requires_action"
	statusRequiresCapture       status = "requires_capture"
	statusCanceled              status = "canceled"
	statusSucceeded             status = "succeeded"
)

// authorizationValidity is how long an uncaptured card authorization holds (Stripe: 7 days
// for customer-initiated online card payments); then the PaymentIntent is canceled.
const authorizationValidity = 7 * 24 * time.Hour

// Which statuses allow which operation (Stripe's rules; "processing" never occurs here).
var (
	confirmableFrom = []status{statusRequiresPaymentMethod, statusRequiresConfirmation, statusRequiresAction}
	capturableFrom  = []status{statusRequiresCapture}
	cancelableFrom  = []status{statusRequiresPaymentMethod, statusRequiresCapture, statusRequiresConfirmation, statusRequiresAction}
)

// testCard is what a test PaymentMethod token does when a payment is confirmed with it.
type testCard struct {
	brand, last4      string
	code, declineCode string // non-empty: the card declines
	message           string
	requires3DS       bool
	funding           string // default credit
}

// testCards are Stripe's test PaymentMethod tokens the sandbox knows.
var testCards = map[string]testCard{
	"pm_card_visa":                            {brand: "visa", last4: "4242"},
	"pm_card_visa_debit":                      {brand: "visa", last4: "5556", funding: "debit"},
	"pm_card_mastercard":                      {brand: "mastercard", last4: "4444"},
	"pm_card_amex":                            {brand: "amex", last4: "8431"},
	"pm_card_chargeDeclined":                  {brand: "visa", last4: "0002", code: "card_declined", declineCode: "generic_decline", message: "Your card was declined."},
	"pm_card_chargeDeclinedInsufficientFunds": {brand: "visa", last4: "9995", code: "card_declined", declineCode: "insufficient_funds", message: "Your card has insufficient funds."},
	"pm_card_chargeDeclinedLostCard":          {brand: "visa", last4: "9987", code: "card_declined", declineCode: "lost_card", message: "Your card was declined."},
	"pm_card_chargeDeclinedStolenCard":        {brand: "visa", last4: "9979", code: "card_declined", declineCode: "stolen_card", message: "Your card was declined."},
	"pm_card_threeDSecure2Required":           {brand: "visa", last4: "3220", requires3DS: true},
	"pm_card_authenticationRequired":          {brand: "visa", last4: "3184", requires3DS: true},
}

// paymentMethod is a card PaymentMethod created from a test token.
type paymentMethod struct {
	id      string
	token   string
	card    testCard
	created time.Time
	saved   memo[struct{}] // its snapshot record (persist.go)
}

type paymentMethodJSON struct {
	ID       string            `json:"id"`
	Object   string            `json:"object"`
	Type     string            `json:"type"`
	Card     paymentCardJSON   `json:"card"`
	Created  int64             `json:"created"`
	Customer *string           `json:"customer"`
	Livemode bool              `json:"livemode"`
	Metadata map[string]string `json:"metadata"`
}

type paymentCardJSON struct {
	Brand    string `json:"brand"`
	Last4    string `json:"last4"`
	ExpMonth int64  `json:"exp_month"`
	ExpYear  int64  `json:"exp_year"`
	Funding  string `json:"funding"`
	Country  string `json:"country"`
}

func (pm *paymentMethod) json() paymentMethodJSON {
	funding := pm.card.funding
	if funding == "" {
		funding = "credit"
	}
	return paymentMethodJSON{
		ID: pm.id, Object: "payment_method", Type: "card", Created: pm.created.Unix(), Metadata: map[string]string{},
		Card: paymentCardJSON{Brand: pm.card.brand, Last4: pm.card.last4, ExpMonth: 12, ExpYear: int64(pm.created.Year() + 3), Funding: funding, Country: "US"},
	}
}

// paymentIntent is the state of one PaymentIntent. Its methods apply Stripe's transitions and
// return an *apiError when the current status does not allow the operation; they do no I/O.
type paymentIntent struct {
	id, clientSecret   string
	amount             int64
	amountCapturable   int64
	amountReceived     int64
	currency           string
	captureMethod      string
	description        string
	metadata           map[string]string
	status             status
	paymentMethod      *paymentMethod
	lastError          *apiError
	latestCharge       *charge
	created            time.Time
	authorizedAt       time.Time
	canceledAt         time.Time
	cancellationReason string
	returnURL          string
	saved              memo[intentMemoKey] // its snapshot record (persist.go)
}

// outcome is what a confirmation led to; it decides which events are emitted.
type outcome int

const (
	outcomeRequiresAction outcome = iota // waiting for 3-D Secure
	outcomeDeclined                      // card error kept in last_payment_error
	outcomeAuthorized                    // manual capture: requires_capture
	outcomeSucceeded                     // automatic capture: succeeded
)

// confirm runs the payment with the attached payment method at now. On a decline the card
// error is kept as last_payment_error and the PaymentIntent is back at
// requires_payment_method without a payment method, as Stripe leaves it. newCharge records
// each charge attempt (succeeded or failed).
func (pi *paymentIntent) confirm(now time.Time, newCharge func(pi *paymentIntent, pm *paymentMethod, paid bool) *charge) (outcome, *apiError) {
	if !slices.Contains(confirmableFrom, pi.status) {
		return 0, unexpectedState(pi, "confirm", confirmableFrom)
	}
	pm := pi.paymentMethod
	if pm == nil {
		e := invalidRequest(http.StatusBadRequest, "payment_intent_unexpected_state", "",
			"You cannot confirm this PaymentIntent because it's missing a payment method. To confirm the PaymentIntent with "+
				"a payment method, update it with one first or pass payment_method when confirming.")
		j := pi.json()
		e.PaymentIntent = &j
		return 0, e
	}
	pi.lastError = nil
	// A second confirm of a PaymentIntent waiting for 3-D Secure stands for the customer
	// completing the challenge.
	if pm.card.requires3DS && pi.status != statusRequiresAction {
		pi.status = statusRequiresAction
		return outcomeRequiresAction, nil
	}
	if pm.card.code != "" {
		ch := newCharge(pi, pm, false)
		pi.latestCharge = ch
		pmj := pm.json()
		pi.lastError = &apiError{
			status: http.StatusPaymentRequired, Type: errCard, Code: pm.card.code, DeclineCode: pm.card.declineCode,
			Message: pm.card.message, DocURL: docURL(pm.card.code), Charge: ch.id, PaymentMethod: &pmj,
		}
		pi.paymentMethod = nil
		pi.status = statusRequiresPaymentMethod
		return outcomeDeclined, nil
	}
	ch := newCharge(pi, pm, true)
	pi.latestCharge = ch
	if pi.captureMethod == "manual" {
		pi.status = statusRequiresCapture
		pi.amountCapturable = pi.amount
		pi.authorizedAt = now
		return outcomeAuthorized, nil
	}
	ch.capture(pi.amount)
	pi.status = statusSucceeded
	pi.amountReceived = pi.amount
	return outcomeSucceeded, nil
}

// capture takes amount (0: everything authorized) of an authorized PaymentIntent; the rest
// of the authorization is released.
func (pi *paymentIntent) capture(amount int64) *apiError {
	if !slices.Contains(capturableFrom, pi.status) {
		return unexpectedState(pi, "capture", capturableFrom)
	}
	if amount == 0 {
		amount = pi.amountCapturable
	}
	if amount > pi.amountCapturable {
		e := invalidRequest(http.StatusBadRequest, "amount_too_large", "amount_to_capture",
			"The amount to capture must be less than or equal to the amount capturable on the PaymentIntent.")
		e.validation = true
		return e
	}
	pi.latestCharge.capture(amount)
	pi.amountReceived = amount
	pi.amountCapturable = 0
	pi.status = statusSucceeded
	return nil
}

// cancel cancels the PaymentIntent for reason (may be empty) and releases any authorization.
func (pi *paymentIntent) cancel(now time.Time, reason string) *apiError {
	if !slices.Contains(cancelableFrom, pi.status) {
		return unexpectedState(pi, "cancel", cancelableFrom)
	}
	pi.status = statusCanceled
	pi.amountCapturable = 0
	pi.canceledAt = now
	pi.cancellationReason = reason
	return nil
}

// expire cancels an authorization that was not captured in time.
func (pi *paymentIntent) expire(at time.Time) {
	pi.status = statusCanceled
	pi.amountCapturable = 0
	pi.canceledAt = at
	pi.cancellationReason = "automatic"
}

// paymentIntentJSON is the PaymentIntent object as Stripe renders it (the fields stripe-go
// decodes; nullable ones are pointers).
type paymentIntentJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CanceledAt         *int64            `json:"canceled_at"`
	CancellationReason *string           `json:"cancellation_reason"`
	CaptureMethod      string            `json:"capture_method"`
	ClientSecret       string            `json:"client_secret"`
	ConfirmationMethod string            `json:"confirmation_method"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Customer           *string           `json:"customer"`
	Description        *string           `json:"description"`
	LastPaymentError   *apiError         `json:"last_payment_error"`
	LatestCharge       *string           `json:"latest_charge"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	NextAction         *nextActionJSON   `json:"next_action"`
	PaymentMethod      *string           `json:"payment_method"`
	PaymentMethodTypes []string          `json:"payment_method_types"`
	Status             status            `json:"status"`
}

type nextActionJSON struct {
	Type          string             `json:"type"`
	UseStripeSDK  map[string]string  `json:"use_stripe_sdk,omitempty"`
	RedirectToURL *redirectToURLJSON `json:"redirect_to_url,omitempty"`
}

type redirectToURLJSON struct {
	ReturnURL string `json:"return_url"`
	URL       string `json:"url"`
}

func (pi *paymentIntent) json() paymentIntentJSON {
	j := paymentIntentJSON{
		ID: pi.id, Object: "payment_intent", Amount: pi.amount, AmountCapturable: pi.amountCapturable,
		AmountReceived: pi.amountReceived, CaptureMethod: pi.captureMethod, ClientSecret: pi.clientSecret,
		ConfirmationMethod: "automatic", Created: pi.created.Unix(), Currency: pi.currency,
		LastPaymentError: pi.lastError, Metadata: pi.metadata, PaymentMethodTypes: []string{"card"}, Status: pi.status,
	}
	if j.Metadata == nil {
		j.Metadata = map[string]string{}
	}
	if pi.description != "" {
		j.Description = &pi.description
	}
	if pi.status == statusCanceled {
		t := pi.canceledAt.Unix()
		j.CanceledAt = &t
		if pi.cancellationReason != "" {
			j.CancellationReason = &pi.cancellationReason
		}
	}
	if pi.latestCharge != nil {
		j.LatestCharge = &pi.latestCharge.id
	}
	if pi.paymentMethod != nil {
		j.PaymentMethod = &pi.paymentMethod.id
	}
	if pi.status == statusRequiresAction {
		if pi.returnURL != "" {
			j.NextAction = &nextActionJSON{Type: "redirect_to_url", RedirectToURL: &redirectToURLJSON{
				ReturnURL: pi.returnURL, URL: "https://hooks.stripe.com/3d_secure_2/hosted?payment_intent=" + pi.id,
			}}
		} else {
			j.NextAction = &nextActionJSON{Type: "use_stripe_sdk", UseStripeSDK: map[string]string{"type": "stripe_3ds2_fingerprint"}}
		}
	}
	return j
}
