package paysim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// komojuIdempotencyHeader carries a POST's idempotency key, at most 100 ASCII characters.
const (
	komojuIdempotencyHeader = "X-KOMOJU-IDEMPOTENCY"
	komojuMaxKeyLength      = 100
)

// komojuError is KOMOJU's error object with the HTTP status it is sent with.
type komojuError struct {
	status  int
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`

	// validation marks errors found before the endpoint started executing; no idempotent
	// result is saved for them, so a corrected retry with the same key runs.
	validation bool
}

func komojuErr(status int, code, param, msg string) *komojuError {
	return &komojuError{status: status, Code: code, Message: msg, Param: stringPtr(param)}
}

func (e *komojuError) Error() string { return e.Code + ": " + e.Message }

// reply is the error as KOMOJU sends it: {"error": {...}} with its status.
func (e *komojuError) reply() reply {
	return reply{status: e.status, body: mustJSON(map[string]any{"error": e}), save: !e.validation}
}

func komojuMissing(param string) *komojuError {
	e := komojuErr(http.StatusUnprocessableEntity, "missing_parameter", param, fmt.Sprintf("A required parameter (%s) is missing", param))
	e.validation = true
	return e
}

func komojuInvalid(param, msg string) *komojuError {
	e := komojuErr(http.StatusUnprocessableEntity, "invalid_parameter", param, msg)
	e.validation = true
	return e
}

func komojuNotFound(what, id string) *komojuError {
	return komojuErr(http.StatusNotFound, "not_found", "", fmt.Sprintf("The requested %s (%s) could not be found.", what, id))
}

// komojuDialect is how KOMOJU answers what the shared machinery does. KOMOJU does not document
// the answer to a key reused with another body; the sandbox's is 422 unprocessable_entity.
var komojuDialect = dialect{
	name: DialectKomoju,
	mismatch: func(c *call, rec *idemRecord) reply {
		return komojuErr(http.StatusUnprocessableEntity, "unprocessable_entity", "",
			fmt.Sprintf("The idempotency key %q was first used for another request (%s with other parameters); use a new key for a new request.",
				c.idemKey, rec.endpoint)).reply()
	},
	unavailable: func(cause string) reply {
		return komojuErr(http.StatusInternalServerError, "internal_server_error", "",
			"Something went wrong on our side ("+cause+").").reply()
	},
}

// komojuRequest is what a KOMOJU handler gets: the raw JSON body, the path's {id}, the query.
type komojuRequest struct {
	body  []byte
	id    string
	query url.Values
}

type komojuHandler func(r *komojuRequest) (any, *komojuError)

func (s *Server) komojuRoutes(mux *http.ServeMux) {
	mux.Handle("POST /api/v1/payments", s.komojuAPI(s.createKomojuPayment))
	mux.Handle("GET /api/v1/payments/{id}", s.komojuAPI(s.showKomojuPayment))
	mux.Handle("POST /api/v1/payments/{id}/capture", s.komojuAPI(s.captureKomojuPayment))
	mux.Handle("POST /api/v1/payments/{id}/cancel", s.komojuAPI(s.cancelKomojuPayment))
	mux.Handle("POST /api/v1/payments/{id}/refund", s.komojuAPI(s.refundKomojuPayment))
	mux.Handle("GET /api/v1/events", s.komojuAPI(s.listKomojuEvents))
	mux.Handle("GET /api/v1/events/{id}", s.komojuAPI(s.showKomojuEvent))
	mux.Handle("/api/v1/", s.komojuAPI(nil)) // unknown: answered in komojuAPI
}

// komojuAPI wraps a KOMOJU endpoint with what every KOMOJU endpoint does: HTTP Basic
// authentication with the secret key, reading the body, the idempotency header and the error
// JSON; serve does the rest (idempotency, faults, events).
func (s *Server) komojuAPI(h komojuHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		apiKey, kerr := s.authenticateKomoju(r)
		if kerr != nil {
			writeReply(w, kerr.reply())
			return
		}
		if h == nil {
			writeReply(w, komojuErr(http.StatusNotFound, "not_found", "", fmt.Sprintf("No such endpoint: %s %s", r.Method, r.URL.Path)).reply())
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			writeReply(w, komojuErr(http.StatusBadRequest, "bad_request", "", "Cannot read the request body: "+err.Error()).reply())
			return
		}
		var key string
		if r.Method == http.MethodPost {
			key = strings.TrimSpace(r.Header.Get(komojuIdempotencyHeader))
		}
		if len(key) > komojuMaxKeyLength {
			writeReply(w, komojuErr(http.StatusBadRequest, "bad_request", "", fmt.Sprintf("%s is limited to %d characters.", komojuIdempotencyHeader, komojuMaxKeyLength)).reply())
			return
		}
		s.serve(w, r, call{
			dialect: &komojuDialect, apiKey: apiKey, idemKey: key, endpoint: r.Method + " " + r.URL.Path,
			params: canonicalJSON(body) + "?" + r.URL.Query().Encode(), requestID: newID("req"),
			run: func() reply {
				result, kerr := h(&komojuRequest{body: body, id: r.PathValue("id"), query: r.URL.Query()})
				if kerr != nil {
					return kerr.reply()
				}
				return reply{status: http.StatusOK, body: mustJSON(result), save: true}
			},
		})
	})
}

// authenticateKomoju returns the secret key of the request, the user name of HTTP Basic
// authentication, or KOMOJU's 401.
func (s *Server) authenticateKomoju(r *http.Request) (string, *komojuError) {
	var key string
	if h, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Basic "); ok {
		if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h)); err == nil {
			key, _, _ = strings.Cut(string(raw), ":")
		}
	}
	if key == "" {
		return "", komojuErr(http.StatusUnauthorized, "unauthorized", "",
			"No API key given: use HTTP Basic authentication with your secret key as the user name.")
	}
	if !strings.HasPrefix(key, "sk_test_") || (s.opts.KomojuSecretKey != "" && key != s.opts.KomojuSecretKey) {
		return "", komojuErr(http.StatusUnauthorized, "unauthorized", "", "User authorization failed: invalid secret key "+redactKey(key))
	}
	return key, nil
}

// canonicalJSON is body with its object keys sorted and no insignificant white space, so that
// a retry that encodes the same request differently is still the same request; a body that
// is not JSON is kept as it is.
func canonicalJSON(body []byte) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if len(bytes.TrimSpace(body)) == 0 || dec.Decode(&v) != nil {
		return string(body)
	}
	return string(mustJSON(v))
}

// decodeKomoju reads a JSON body into v; an empty body leaves v as it is. A body that is not
// JSON is 400 bad_request, a value of the wrong type 422 invalid_parameter.
func decodeKomoju(body []byte, v any) *komojuError {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	err := json.Unmarshal(body, v)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return komojuInvalid(te.Field, fmt.Sprintf("%s must be a %s, not a %s", te.Field, te.Type, te.Value))
	}
	e := komojuErr(http.StatusBadRequest, "bad_request", "", "The request body is not valid JSON: "+err.Error())
	e.validation = true
	return e
}

type komojuCreateParams struct {
	Amount           *int64               `json:"amount"`
	Currency         string               `json:"currency"`
	ExternalOrderNum string               `json:"external_order_num"`
	Capture          json.RawMessage      `json:"capture"`
	Description      string               `json:"description"`
	Metadata         map[string]any       `json:"metadata"`
	PaymentDetails   *komojuDetailsParams `json:"payment_details"`
}

type komojuDetailsParams struct {
	Type       string `json:"type"`
	Store      string `json:"store"`
	Email      string `json:"email"`
	Phone      string `json:"phone"`
	ExpiryDays *int   `json:"expiry_days"`
}

// manualCapture reads capture: KOMOJU's boolean (false: authorize only) or the sandbox's
// "auto"/"manual" spelling; absent is automatic capture.
func manualCapture(raw json.RawMessage) (bool, *komojuError) {
	switch strings.TrimSpace(string(raw)) {
	case "", "null", "true", `"auto"`:
		return false, nil
	case "false", `"manual"`:
		return true, nil
	}
	return false, komojuInvalid("capture", "capture must be true, false, \"auto\" or \"manual\"")
}

func (s *Server) createKomojuPayment(r *komojuRequest) (any, *komojuError) {
	var p komojuCreateParams
	if err := decodeKomoju(r.body, &p); err != nil {
		return nil, err
	}
	switch {
	case p.Amount == nil:
		return nil, komojuMissing("amount")
	case *p.Amount < 1:
		return nil, komojuInvalid("amount", "amount must be at least 1")
	case p.Currency == "":
		return nil, komojuMissing("currency")
	case strings.ToUpper(p.Currency) != "JPY":
		return nil, komojuInvalid("currency", fmt.Sprintf("currency %s is not supported for these payment methods (only JPY)", p.Currency))
	case p.PaymentDetails == nil:
		return nil, komojuMissing("payment_details")
	}
	manual, err := manualCapture(p.Capture)
	if err != nil {
		return nil, err
	}
	d := p.PaymentDetails
	now := s.nowLocked()
	pay := &komojuPayment{
		id: newKomojuID(), typ: d.Type, amount: *p.Amount, currency: "JPY", externalOrderNum: p.ExternalOrderNum,
		description: p.Description, metadata: p.Metadata, manualCapture: manual, created: now,
		email: d.Email, phone: d.Phone,
	}
	var validity time.Duration
	switch d.Type {
	case "":
		return nil, komojuMissing("payment_details.type")
	case komojuKonbini:
		switch {
		case d.Store == "":
			return nil, komojuMissing("payment_details.store")
		case !slices.Contains(konbiniStores, d.Store):
			return nil, komojuInvalid("payment_details.store", fmt.Sprintf("store %q is not one of %s", d.Store, strings.Join(konbiniStores, ", ")))
		case d.Email == "":
			return nil, komojuMissing("payment_details.email")
		}
		pay.store, pay.receipt = d.Store, randomDigits(11)
		if d.Store != "seven-eleven" { // 7-Eleven asks for the receipt number only
			pay.confirmationCode = randomDigits(4)
		}
		validity = konbiniValidity
	case komojuBankTransfer:
		if d.Email == "" {
			return nil, komojuMissing("payment_details.email")
		}
		pay.bank = bankAccount{bankName: "Paysim Sandbox Bank", bankCode: "0999", branchName: "Komoju Branch", branchNumber: "101",
			accountType: "ordinary", accountNumber: randomDigits(7), accountName: "KOMOJU PAYSIM"}
		validity = bankTransferValidity
	case komojuPayPay:
		pay.customer, _ = p.Metadata["customer_id"].(string)
	default:
		return nil, komojuInvalid("payment_details.type", fmt.Sprintf("payment type %q is not supported (want konbini, bank_transfer or paypay)", d.Type))
	}
	if d.ExpiryDays != nil {
		if !pay.usesSlip() {
			return nil, komojuInvalid("payment_details.expiry_days", "expiry_days applies to konbini and bank_transfer only")
		}
		if *d.ExpiryDays < 1 || *d.ExpiryDays > maxExpiryDays {
			return nil, komojuInvalid("payment_details.expiry_days", fmt.Sprintf("expiry_days must be between 1 and %d", maxExpiryDays))
		}
		validity = time.Duration(*d.ExpiryDays) * 24 * time.Hour
	}

	s.komoju.payments[pay.id] = pay
	s.komoju.order = append(s.komoju.order, pay.id)
	if pay.usesSlip() {
		pay.instructionsURL = s.URL() + "/_sandbox/komoju/payments/" + pay.id
		pay.issueSlip(now, now.Add(validity))
		s.watchKomojuLocked(pay)
		s.emitKomojuLocked("payment.authorized", pay, "")
		return pay.json(), nil
	}
	pay.chargeWallet(now, s.komoju.wallets[pay.customer])
	s.watchKomojuLocked(pay)
	switch pay.status {
	case komojuFailed:
		s.emitKomojuLocked("payment.failed", pay, pay.failureReason)
	case komojuAuthorized:
		s.emitKomojuLocked("payment.authorized", pay, "")
	case komojuCaptured:
		s.emitKomojuLocked("payment.captured", pay, "")
	}
	return pay.json(), nil
}

func (s *Server) komojuPaymentLocked(id string) (*komojuPayment, *komojuError) {
	p, ok := s.komoju.payments[id]
	if !ok {
		return nil, komojuNotFound("payment", id)
	}
	return p, nil
}

func (s *Server) showKomojuPayment(r *komojuRequest) (any, *komojuError) {
	p, err := s.komojuPaymentLocked(r.id)
	if err != nil {
		return nil, err
	}
	return p.json(), nil
}

func (s *Server) captureKomojuPayment(r *komojuRequest) (any, *komojuError) {
	p, err := s.komojuPaymentLocked(r.id)
	if err != nil {
		return nil, err
	}
	if err := p.capture(s.nowLocked(), s.komoju.walletOf(p)); err != nil {
		return nil, err
	}
	s.emitKomojuLocked("payment.captured", p, "")
	return p.json(), nil
}

func (s *Server) cancelKomojuPayment(r *komojuRequest) (any, *komojuError) {
	p, err := s.komojuPaymentLocked(r.id)
	if err != nil {
		return nil, err
	}
	if err := p.cancel(s.komoju.walletOf(p)); err != nil {
		return nil, err
	}
	s.emitKomojuLocked("payment.cancelled", p, "")
	return p.json(), nil
}

func (s *Server) refundKomojuPayment(r *komojuRequest) (any, *komojuError) {
	p, err := s.komojuPaymentLocked(r.id)
	if err != nil {
		return nil, err
	}
	var params struct {
		Amount      int64  `json:"amount"`
		Description string `json:"description"`
	}
	if err := decodeKomoju(r.body, &params); err != nil {
		return nil, err
	}
	if p.usesSlip() {
		// KOMOJU cannot hand a slip's cash back: it accepts a refund request and pays the
		// customer by bank transfer later. The answer says so (captured, the request pending);
		// the payout, or its rejection, sends the webhooks.
		now := s.nowLocked()
		if err := p.requestRefund(newKomojuID(), params.Amount, params.Description, now, now.Add(s.opts.KomojuRefundPayout)); err != nil {
			return nil, err
		}
		s.watchRefundLocked(p)
		return p.json(), nil
	}
	if err := p.refund(newKomojuID(), params.Amount, params.Description, s.nowLocked(), s.komoju.walletOf(p)); err != nil {
		return nil, err
	}
	s.emitKomojuLocked("payment.refund.created", p, "")
	if p.status == komojuRefunded {
		s.emitKomojuLocked("payment.refunded", p, "")
	}
	return p.json(), nil
}

func (s *Server) showKomojuEvent(r *komojuRequest) (any, *komojuError) {
	e, ok := s.komoju.byEvent[r.id]
	if !ok {
		return nil, komojuNotFound("event", r.id)
	}
	return e.json(), nil
}

// komojuListJSON is KOMOJU's list object (page-numbered).
type komojuListJSON struct {
	Resource string `json:"resource"`
	Total    int    `json:"total"`
	Page     int    `json:"page"`
	PerPage  int    `json:"per_page"`
	LastPage int    `json:"last_page"`
	Data     []any  `json:"data"`
}

// listKomojuEvents lists events newest first, page by page (page from 1, per_page 1-100,
// default 10).
func (s *Server) listKomojuEvents(r *komojuRequest) (any, *komojuError) {
	page, err := positiveQuery(r.query, "page", 1, 0)
	if err != nil {
		return nil, err
	}
	perPage, err := positiveQuery(r.query, "per_page", 10, 100)
	if err != nil {
		return nil, err
	}
	evs := s.komoju.events
	l := komojuListJSON{Resource: "list", Total: len(evs), Page: page, PerPage: perPage,
		LastPage: (len(evs) + perPage - 1) / perPage, Data: []any{}}
	for i := len(evs) - 1 - (page-1)*perPage; i >= 0 && len(l.Data) < perPage; i-- {
		l.Data = append(l.Data, evs[i].json())
	}
	return l, nil
}

// positiveQuery reads an optional positive integer query parameter, at most max (0: no limit).
func positiveQuery(q url.Values, name string, def, max int) (int, *komojuError) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || (max > 0 && n > max) {
		limit := ""
		if max > 0 {
			limit = fmt.Sprintf(" up to %d", max)
		}
		return 0, komojuInvalid(name, fmt.Sprintf("%s must be a whole number from 1%s", name, limit))
	}
	return n, nil
}
