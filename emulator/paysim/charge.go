package paysim

import (
	"fmt"
	"net/http"
	"time"
)

// charge is the Charge behind a confirmation: failed for a decline, otherwise an
// authorization that is captured at once or later.
type charge struct {
	id             string
	amount         int64
	amountCaptured int64
	amountRefunded int64
	currency       string
	paid           bool
	captured       bool
	intentID       string
	pm             *paymentMethod
	failureCode    string
	failureMessage string
	created        time.Time
	saved          memo[snapCharge] // its snapshot record (persist.go)
}

func (ch *charge) capture(amount int64) {
	ch.captured = true
	ch.amountCaptured = amount
}

// refundable is what is captured and not yet refunded.
func (ch *charge) refundable() int64 { return ch.amountCaptured - ch.amountRefunded }

// refund takes amount (0: all that is left) back from a captured charge.
func (ch *charge) refund(amount int64) (int64, *apiError) {
	left := ch.refundable()
	if left == 0 {
		return 0, invalidRequest(http.StatusBadRequest, "charge_already_refunded", "",
			fmt.Sprintf("Charge %s has already been refunded.", ch.id))
	}
	if amount == 0 {
		amount = left
	}
	if amount > left {
		e := invalidRequest(http.StatusBadRequest, "amount_too_large", "amount",
			fmt.Sprintf("Refund amount (%s) is greater than unrefunded amount on charge (%s)", money(amount, ch.currency), money(left, ch.currency)))
		e.validation = true
		return 0, e
	}
	ch.amountRefunded += amount
	return amount, nil
}

// money formats a minor-unit amount the way Stripe's messages do for two-decimal currencies.
func money(amount int64, currency string) string {
	sym := map[string]string{"usd": "$", "eur": "€", "gbp": "£"}[currency]
	if sym == "" {
		return fmt.Sprintf("%d.%02d %s", amount/100, amount%100, currency)
	}
	return fmt.Sprintf("%s%d.%02d", sym, amount/100, amount%100)
}

type chargeJSON struct {
	ID                   string             `json:"id"`
	Object               string             `json:"object"`
	Amount               int64              `json:"amount"`
	AmountCaptured       int64              `json:"amount_captured"`
	AmountRefunded       int64              `json:"amount_refunded"`
	Captured             bool               `json:"captured"`
	Created              int64              `json:"created"`
	Currency             string             `json:"currency"`
	FailureCode          *string            `json:"failure_code"`
	FailureMessage       *string            `json:"failure_message"`
	Livemode             bool               `json:"livemode"`
	Metadata             map[string]string  `json:"metadata"`
	Paid                 bool               `json:"paid"`
	PaymentIntent        string             `json:"payment_intent"`
	PaymentMethod        string             `json:"payment_method"`
	PaymentMethodDetails paymentDetailsJSON `json:"payment_method_details"`
	Refunded             bool               `json:"refunded"`
	Status               string             `json:"status"`
}

type paymentDetailsJSON struct {
	Type string          `json:"type"`
	Card paymentCardJSON `json:"card"`
}

func (ch *charge) json() chargeJSON {
	j := chargeJSON{
		ID: ch.id, Object: "charge", Amount: ch.amount, AmountCaptured: ch.amountCaptured, AmountRefunded: ch.amountRefunded,
		Captured: ch.captured, Created: ch.created.Unix(), Currency: ch.currency, Metadata: map[string]string{},
		Paid: ch.paid, PaymentIntent: ch.intentID, PaymentMethod: ch.pm.id,
		PaymentMethodDetails: paymentDetailsJSON{Type: "card", Card: ch.pm.json().Card},
		Refunded:             ch.captured && ch.amountRefunded == ch.amountCaptured,
		Status:               "succeeded",
	}
	if !ch.paid {
		j.Status = "failed"
		j.FailureCode = &ch.failureCode
		j.FailureMessage = &ch.failureMessage
	}
	return j
}

// refund is a Refund, which in the sandbox always succeeds at once.
type refund struct {
	id       string
	amount   int64
	currency string
	chargeID string
	intentID string
	reason   string
	metadata map[string]string
	created  time.Time
	saved    memo[struct{}] // its snapshot record (persist.go)
}

type refundJSON struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Charge        string            `json:"charge"`
	Created       int64             `json:"created"`
	Currency      string            `json:"currency"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent string            `json:"payment_intent"`
	Reason        *string           `json:"reason"`
	Status        string            `json:"status"`
}

func (r *refund) json() refundJSON {
	j := refundJSON{
		ID: r.id, Object: "refund", Amount: r.amount, Charge: r.chargeID, Created: r.created.Unix(),
		Currency: r.currency, Metadata: r.metadata, PaymentIntent: r.intentID, Status: "succeeded",
	}
	if j.Metadata == nil {
		j.Metadata = map[string]string{}
	}
	if r.reason != "" {
		j.Reason = &r.reason
	}
	return j
}
