package paysim

import (
	"fmt"
	"net/http"
	"strings"
)

// Stripe's error types (the "type" of an error object).
const (
	errInvalidRequest = "invalid_request_error"
	errCard           = "card_error"
	errIdempotency    = "idempotency_error"
	errAPI            = "api_error"
)

// apiError is a Stripe error object with the HTTP status it is sent with.
type apiError struct {
	status        int
	Type          string             `json:"type"`
	Code          string             `json:"code,omitempty"`
	DeclineCode   string             `json:"decline_code,omitempty"`
	Message       string             `json:"message"`
	Param         string             `json:"param,omitempty"`
	DocURL        string             `json:"doc_url,omitempty"`
	Charge        string             `json:"charge,omitempty"`
	PaymentIntent *paymentIntentJSON `json:"payment_intent,omitempty"`
	PaymentMethod *paymentMethodJSON `json:"payment_method,omitempty"`
	RequestLogURL string             `json:"request_log_url,omitempty"`

	// validation marks errors found before the endpoint started executing; Stripe saves no
	// idempotent result for them, so a retry with the same key runs again.
	validation bool
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (%s): %s", e.Type, e.Code, e.Message) }

// reply is the error as Stripe sends it: {"error": {...}} with its status.
func (e *apiError) reply() reply {
	return reply{status: e.status, body: mustJSON(map[string]any{"error": e}), save: !e.validation}
}

// docURL is where Stripe documents an error code.
func docURL(code string) string {
	if code == "" {
		return ""
	}
	return "https://docs.stripe.com/error-codes/" + strings.ReplaceAll(code, "_", "-")
}

func invalidRequest(status int, code, param, msg string) *apiError {
	return &apiError{status: status, Type: errInvalidRequest, Code: code, Param: param, Message: msg, DocURL: docURL(code)}
}

func missingParam(param string) *apiError {
	e := invalidRequest(http.StatusBadRequest, "parameter_missing", param, fmt.Sprintf("Missing required param: %s.", param))
	e.validation = true
	return e
}

func invalidParam(param, msg string) *apiError {
	e := invalidRequest(http.StatusBadRequest, "parameter_invalid", param, msg)
	e.validation = true
	return e
}

func invalidInteger(param, value string) *apiError {
	e := invalidRequest(http.StatusBadRequest, "parameter_invalid_integer", param, fmt.Sprintf("Invalid integer: %s", value))
	e.validation = true
	return e
}

func noSuch(object, param, id string) *apiError {
	return invalidRequest(http.StatusNotFound, "resource_missing", param, fmt.Sprintf("No such %s: '%s'", object, id))
}

// unexpectedState is the error for an operation the PaymentIntent's status does not allow.
func unexpectedState(pi *paymentIntent, verb string, allowed []status) *apiError {
	names := make([]string, len(allowed))
	for i, st := range allowed {
		names[i] = string(st)
	}
	e := invalidRequest(http.StatusBadRequest, "payment_intent_unexpected_state", "",
		fmt.Sprintf("You cannot %s this PaymentIntent because it has a status of %s. Only a PaymentIntent with one of the following statuses may be %s: %s.",
			verb, pi.status, pastTense(verb), strings.Join(names, ", ")))
	j := pi.json()
	e.PaymentIntent = &j
	return e
}

func pastTense(verb string) string {
	if strings.HasSuffix(verb, "e") {
		return verb + "d"
	}
	return verb + "ed"
}
