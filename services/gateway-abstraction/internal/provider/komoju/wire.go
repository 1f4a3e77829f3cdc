package komoju

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// KOMOJU's payment statuses.
const (
	statusPending    = "pending"
	statusAuthorized = "authorized"
	statusCaptured   = "captured"
	statusRefunded   = "refunded"
	statusCancelled  = "cancelled"
	statusExpired    = "expired"
	statusFailed     = "failed"
)

// KOMOJU's refund request statuses. A refund request is how KOMOJU gives back money it cannot
// return the way it came (a konbini or bank transfer payment's: by bank transfer to the
// customer's account, by hand, later); until it is completed the payment stays captured.
const (
	refundRequestPending   = "pending"
	refundRequestCompleted = "completed"
	refundRequestRejected  = "rejected"
)

// KOMOJU's payment types (payment_details.type) the gateway uses.
const (
	typeKonbini      = "konbini"
	typeBankTransfer = "bank_transfer"
	typePayPay       = "paypay"
)

// insufficientFunds is KOMOJU's reason for a wallet that cannot cover the amount.
const insufficientFunds = "insufficient_funds"

// paymentJSON is the part of KOMOJU's Payment object the adapter reads.
type paymentJSON struct {
	ID               string              `json:"id"`
	Status           string              `json:"status"`
	PaymentDeadline  *string             `json:"payment_deadline"`
	PaymentDetails   *detailsJSON        `json:"payment_details"`
	ExternalOrderNum *string             `json:"external_order_num"`
	Metadata         map[string]any      `json:"metadata"`
	FailureReason    *string             `json:"failure_reason"`
	RefundRequests   []refundRequestJSON `json:"refund_requests"`
}

// refundRequestJSON is the part of KOMOJU's RefundRequest object the adapter reads: in a
// payment's refund_requests (oldest first), and as the data of a refund_request.updated event.
type refundRequestJSON struct {
	ID      string `json:"id"`
	Payment string `json:"payment"` // the payment's KOMOJU id
	Status  string `json:"status"`
}

// openRefund reports whether a refund request of p is pending: KOMOJU accepted it and has not
// paid it out.
func (p paymentJSON) openRefund() bool {
	for _, r := range p.RefundRequests {
		if r.Status == refundRequestPending {
			return true
		}
	}
	return false
}

// lastRefundRequest is p's latest refund request; nil if it has none.
func (p paymentJSON) lastRefundRequest() *refundRequestJSON {
	if len(p.RefundRequests) == 0 {
		return nil
	}
	return &p.RefundRequests[len(p.RefundRequests)-1]
}

// detailsJSON is the part of payment_details the adapter reads: the type, and what a slip
// shows the customer.
type detailsJSON struct {
	Type             string  `json:"type"`
	Store            string  `json:"store"`
	Receipt          string  `json:"receipt"`
	ConfirmationCode *string `json:"confirmation_code"`
	InstructionsURL  string  `json:"instructions_url"`
	BankName         string  `json:"bank_name"`
	BranchName       string  `json:"branch_name"`
	AccountType      string  `json:"account_type"`
	AccountNumber    string  `json:"account_number"`
	AccountName      string  `json:"account_name"`
}

func (p paymentJSON) typ() string {
	if p.PaymentDetails == nil {
		return ""
	}
	return p.PaymentDetails.Type
}

func (p paymentJSON) usesSlip() bool { return p.typ() == typeKonbini || p.typ() == typeBankTransfer }

// paymentID is Spanmart's payment id: the metadata Authorize wrote, else external_order_num.
func (p paymentJSON) paymentID() string {
	if id, ok := p.Metadata[metaPaymentID].(string); ok && id != "" {
		return id
	}
	if p.ExternalOrderNum != nil {
		return *p.ExternalOrderNum
	}
	return ""
}

// outcomeOf reads a payment as an Outcome (the table in the package doc); reason is the
// failure reason an event gives, used when the payment gives none. A type or status this
// adapter does not know is an error rather than a guess.
func outcomeOf(p paymentJSON, reason string) (provider.Outcome, error) {
	o := provider.Outcome{ProviderPaymentID: p.ID}
	var method payment.Method
	switch p.typ() {
	case typeKonbini:
		method = payment.Konbini
	case typeBankTransfer:
		method = payment.BankTransfer
	case typePayPay:
		method = payment.Wallet
	default:
		return provider.Outcome{}, fmt.Errorf("payment %s has payment type %q, which the komoju adapter does not know", p.ID, p.typ())
	}
	slip := method.UsesSlip()
	switch p.Status {
	case statusPending:
		o.Status = payment.Requested
	case statusAuthorized:
		if !slip {
			o.Status = payment.Authorized
			break
		}
		s, err := slipOf(p, method)
		if err != nil {
			return provider.Outcome{}, err
		}
		o.Status, o.Slip = payment.Pending, s
	case statusCaptured:
		o.Status = payment.Captured
		if slip {
			o.Status = payment.Authorized // the customer paid: the money is held by the merchant
		}
		switch r := p.lastRefundRequest(); {
		case p.openRefund():
			o.Status = payment.RefundPending // accepted, not paid out: the money is still held
		case r != nil && r.Status == refundRequestRejected:
			o.Status, o.Reason = payment.RefundFailed, payment.ReasonDeclined
		}
	case statusRefunded:
		o.Status = payment.Refunded
	case statusCancelled:
		o.Status = payment.Voided
	case statusExpired:
		o.Status, o.Reason = payment.Expired, payment.ReasonExpired
	case statusFailed:
		if p.FailureReason != nil {
			reason = *p.FailureReason
		}
		o.Status, o.Reason = payment.Failed, payment.ReasonDeclined
		if reason == insufficientFunds {
			o.Reason = payment.ReasonInsufficientFunds
		}
	default:
		return provider.Outcome{}, fmt.Errorf("payment %s has status %q, which the komoju adapter does not know", p.ID, p.Status)
	}
	return o, nil
}

// slipOf is what the customer of an issued slip needs.
func slipOf(p paymentJSON, method payment.Method) (*provider.Slip, error) {
	if p.PaymentDeadline == nil {
		return nil, fmt.Errorf("slip %s has no payment_deadline", p.ID)
	}
	deadline, err := time.Parse(time.RFC3339, *p.PaymentDeadline)
	if err != nil {
		return nil, fmt.Errorf("slip %s: payment_deadline: %w", p.ID, err)
	}
	d := p.PaymentDetails
	s := &provider.Slip{Method: method, InstructionsURL: d.InstructionsURL, ExpiresAt: deadline}
	if method == payment.Konbini {
		s.Store, s.PaymentCode = d.Store, d.Receipt
		if d.ConfirmationCode != nil {
			s.ConfirmationCode = *d.ConfirmationCode
		}
		return s, nil
	}
	s.Bank = &provider.BankAccount{BankName: d.BankName, BranchName: d.BranchName, AccountType: d.AccountType,
		AccountNumber: d.AccountNumber, AccountHolder: d.AccountName}
	return s, nil
}

// readOutcome is outcomeOf for an API answer: a payment the adapter cannot read is an answer
// it cannot use.
func readOutcome(op string, p paymentJSON) (provider.Outcome, error) {
	o, err := outcomeOf(p, "")
	if err != nil {
		return provider.Outcome{}, unavailable(op, http.StatusOK, err)
	}
	return o, nil
}

// errorJSON is KOMOJU's error answer.
type errorJSON struct {
	Error struct {
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// failure turns a non-2xx answer into a *provider.Error (the table in the package doc).
func failure(op, method, path string, status int, body []byte) *provider.Error {
	var e errorJSON
	err := fmt.Errorf("%s %s: http %d", method, path, status)
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		err = fmt.Errorf("%s %s: http %d %s: %s", method, path, status, e.Error.Code, e.Error.Message)
		if e.Error.Param != nil {
			err = fmt.Errorf("%w (param %s)", err, *e.Error.Param)
		}
	}
	switch {
	case status >= 500, status == http.StatusTooManyRequests, status == http.StatusConflict:
		return unavailable(op, status, err)
	case status == http.StatusNotFound:
		err = fmt.Errorf("%w: %w", provider.ErrNotFound, err)
	}
	return &provider.Error{Provider: payment.ProviderKomoju, Op: op, Reason: payment.ReasonInvalidRequest, Status: status, Err: err}
}

// unavailable is a call whose answer is unknown or unusable; trying again with the same key
// can help.
func unavailable(op string, status int, err error) *provider.Error {
	return &provider.Error{Provider: payment.ProviderKomoju, Op: op, Reason: payment.ReasonProviderUnavailable,
		Temporary: true, Status: status, Err: err}
}

// invalid is a request the adapter refuses before calling KOMOJU, or cannot carry out.
func invalid(op, why string) *provider.Error {
	return &provider.Error{Provider: payment.ProviderKomoju, Op: op, Reason: payment.ReasonInvalidRequest, Err: errors.New(why)}
}
