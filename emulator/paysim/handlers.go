package paysim

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

var currencyRE = regexp.MustCompile(`^[a-z]{3}$`)

func (s *Server) createPaymentIntent(r *request) (any, *apiError) {
	f := r.form
	if f.Get("amount") == "" {
		return nil, missingParam("amount")
	}
	amount, _, err := intParam(f, "amount")
	if err != nil {
		return nil, err
	}
	if amount < 1 {
		return nil, invalidParam("amount", "This value must be greater than or equal to 1.")
	}
	currency := strings.ToLower(f.Get("currency"))
	if currency == "" {
		return nil, missingParam("currency")
	}
	if !currencyRE.MatchString(currency) {
		return nil, invalidParam("currency", fmt.Sprintf("Invalid currency: %s.", currency))
	}
	captureMethod, err := oneOf(f, "capture_method", "automatic", "automatic_async", "manual")
	if err != nil {
		return nil, err
	}
	if captureMethod == "" {
		captureMethod = "automatic_async"
	}
	confirm, err := boolParam(f, "confirm")
	if err != nil {
		return nil, err
	}
	var pm *paymentMethod
	if id := f.Get("payment_method"); id != "" {
		if pm, err = s.paymentMethodLocked(id); err != nil {
			return nil, err
		}
	}
	now := s.nowLocked()
	pi := &paymentIntent{
		id: newID("pi"), amount: amount, currency: currency, captureMethod: captureMethod,
		description: f.Get("description"), metadata: metadataParam(f), paymentMethod: pm,
		status: statusRequiresPaymentMethod, created: now, returnURL: f.Get("return_url"),
	}
	pi.clientSecret = pi.id + "_secret_" + newID("s")[2:]
	if pm != nil {
		pi.status = statusRequiresConfirmation
	}
	s.intents[pi.id] = pi
	s.order = append(s.order, pi.id)
	s.emitLocked("payment_intent.created", pi.json())
	if confirm {
		if err := s.confirmLocked(pi); err != nil {
			return nil, err
		}
	}
	return pi.json(), nil
}

// paymentMethodLocked resolves a payment_method parameter: a test token (pm_card_visa, ...)
// creates a new PaymentMethod each time, as Stripe does; an id names one created before.
func (s *Server) paymentMethodLocked(id string) (*paymentMethod, *apiError) {
	if pm, ok := s.pms[id]; ok {
		return pm, nil
	}
	card, ok := testCards[id]
	if !ok {
		return nil, invalidRequest(http.StatusBadRequest, "resource_missing", "payment_method", fmt.Sprintf("No such PaymentMethod: '%s'", id))
	}
	pm := &paymentMethod{id: newID("pm"), token: id, card: card, created: s.nowLocked()}
	s.pms[pm.id] = pm
	return pm, nil
}

// confirmLocked confirms pi and emits the events of the outcome. A decline is returned as the
// 402 card error Stripe answers, with the PaymentIntent in it.
func (s *Server) confirmLocked(pi *paymentIntent) *apiError {
	out, err := pi.confirm(s.nowLocked(), s.newChargeLocked)
	if err != nil {
		return err
	}
	s.watchIntentLocked(pi)
	switch out {
	case outcomeRequiresAction:
		s.emitLocked("payment_intent.requires_action", pi.json())
	case outcomeDeclined:
		s.emitLocked("charge.failed", pi.latestCharge.json())
		s.emitLocked("payment_intent.payment_failed", pi.json())
		e := *pi.lastError
		j := pi.json()
		e.PaymentIntent = &j
		return &e
	case outcomeAuthorized:
		s.emitLocked("charge.succeeded", pi.latestCharge.json())
		s.emitLocked("payment_intent.amount_capturable_updated", pi.json())
	case outcomeSucceeded:
		s.emitLocked("charge.succeeded", pi.latestCharge.json())
		s.emitLocked("payment_intent.succeeded", pi.json())
	}
	return nil
}

func (s *Server) newChargeLocked(pi *paymentIntent, pm *paymentMethod, paid bool) *charge {
	ch := &charge{id: newID("ch"), amount: pi.amount, currency: pi.currency, paid: paid, intentID: pi.id, pm: pm, created: s.nowLocked()}
	if !paid {
		ch.failureCode = pm.card.code
		ch.failureMessage = pm.card.message
	}
	s.charges[ch.id] = ch
	return ch
}

func (s *Server) intentLocked(id string) (*paymentIntent, *apiError) {
	pi, ok := s.intents[id]
	if !ok {
		return nil, noSuch("payment_intent", "intent", id)
	}
	return pi, nil
}

func (s *Server) retrievePaymentIntent(r *request) (any, *apiError) {
	pi, err := s.intentLocked(r.id)
	if err != nil {
		return nil, err
	}
	return pi.json(), nil
}

func (s *Server) confirmPaymentIntent(r *request) (any, *apiError) {
	pi, err := s.intentLocked(r.id)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(confirmableFrom, pi.status) {
		return nil, unexpectedState(pi, "confirm", confirmableFrom)
	}
	if id := r.form.Get("payment_method"); id != "" {
		pm, err := s.paymentMethodLocked(id)
		if err != nil {
			return nil, err
		}
		if pi.paymentMethod == nil || pm.id != pi.paymentMethod.id {
			// A different payment method starts the payment over (and any 3-D Secure with it).
			pi.paymentMethod = pm
			pi.status = statusRequiresConfirmation
		}
	}
	if u := r.form.Get("return_url"); u != "" {
		pi.returnURL = u
	}
	if err := s.confirmLocked(pi); err != nil {
		return nil, err
	}
	return pi.json(), nil
}

func (s *Server) capturePaymentIntent(r *request) (any, *apiError) {
	pi, err := s.intentLocked(r.id)
	if err != nil {
		return nil, err
	}
	amount, _, err := intParam(r.form, "amount_to_capture")
	if err != nil {
		return nil, err
	}
	if amount < 0 {
		return nil, invalidParam("amount_to_capture", "This value must be greater than or equal to 0.")
	}
	if err := pi.capture(amount); err != nil {
		return nil, err
	}
	s.emitLocked("charge.captured", pi.latestCharge.json())
	s.emitLocked("payment_intent.succeeded", pi.json())
	return pi.json(), nil
}

func (s *Server) cancelPaymentIntent(r *request) (any, *apiError) {
	pi, err := s.intentLocked(r.id)
	if err != nil {
		return nil, err
	}
	reason, err := oneOf(r.form, "cancellation_reason", "duplicate", "fraudulent", "requested_by_customer", "abandoned")
	if err != nil {
		return nil, err
	}
	if err := pi.cancel(s.nowLocked(), reason); err != nil {
		return nil, err
	}
	s.emitLocked("payment_intent.canceled", pi.json())
	return pi.json(), nil
}

func (s *Server) retrieveCharge(r *request) (any, *apiError) {
	ch, ok := s.charges[r.id]
	if !ok {
		return nil, noSuch("charge", "id", r.id)
	}
	return ch.json(), nil
}

func (s *Server) createRefund(r *request) (any, *apiError) {
	f := r.form
	var ch *charge
	switch {
	case f.Get("payment_intent") != "":
		pi, ok := s.intents[f.Get("payment_intent")]
		if !ok {
			return nil, invalidRequest(http.StatusBadRequest, "resource_missing", "payment_intent",
				fmt.Sprintf("No such payment_intent: '%s'", f.Get("payment_intent")))
		}
		if pi.status != statusSucceeded {
			return nil, invalidRequest(http.StatusBadRequest, "", "payment_intent",
				fmt.Sprintf("This PaymentIntent (%s) does not have a successful charge to refund.", pi.id))
		}
		ch = pi.latestCharge
	case f.Get("charge") != "":
		var ok bool
		if ch, ok = s.charges[f.Get("charge")]; !ok {
			return nil, invalidRequest(http.StatusBadRequest, "resource_missing", "charge", fmt.Sprintf("No such charge: '%s'", f.Get("charge")))
		}
		if !ch.captured {
			return nil, invalidRequest(http.StatusBadRequest, "", "charge",
				fmt.Sprintf("Charge %s has not been captured and cannot be refunded.", ch.id))
		}
	default:
		e := invalidRequest(http.StatusBadRequest, "parameter_missing", "",
			"One of the following params should be provided for this request: payment_intent or charge.")
		e.validation = true
		return nil, e
	}
	amount, _, err := intParam(f, "amount")
	if err != nil {
		return nil, err
	}
	if amount < 0 {
		return nil, invalidParam("amount", "This value must be greater than or equal to 1.")
	}
	reason, err := oneOf(f, "reason", "duplicate", "fraudulent", "requested_by_customer")
	if err != nil {
		return nil, err
	}
	amount, err = ch.refund(amount)
	if err != nil {
		return nil, err
	}
	rf := &refund{id: newID("re"), amount: amount, currency: ch.currency, chargeID: ch.id, intentID: ch.intentID,
		reason: reason, metadata: metadataParam(f), created: s.nowLocked()}
	s.refunds[rf.id] = rf
	s.rorder = append(s.rorder, rf.id)
	s.emitLocked("refund.created", rf.json())
	s.emitLocked("charge.refunded", ch.json())
	return rf.json(), nil
}

func (s *Server) retrieveRefund(r *request) (any, *apiError) {
	rf, ok := s.refunds[r.id]
	if !ok {
		return nil, noSuch("refund", "id", r.id)
	}
	return rf.json(), nil
}

func (s *Server) retrieveEvent(r *request) (any, *apiError) {
	e, ok := s.byEvent[r.id]
	if !ok {
		return nil, noSuch("event", "id", r.id)
	}
	return e.json(s.opts.APIVersion), nil
}

// listJSON is Stripe's list object.
type listJSON struct {
	Object  string `json:"object"`
	Data    []any  `json:"data"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
}

// listEvents lists events newest first, with Stripe's limit (1-100, default 10),
// starting_after, ending_before and type (exact or "prefix.*") parameters.
func (s *Server) listEvents(r *request) (any, *apiError) {
	f := r.form
	limit, ok, err := intParam(f, "limit")
	if err != nil {
		return nil, err
	}
	if !ok {
		limit = 10
	}
	if limit < 1 || limit > 100 {
		return nil, invalidParam("limit", "This value must be between 1 and 100.")
	}
	typ := f.Get("type")
	var matching []*event
	for i := len(s.events) - 1; i >= 0; i-- {
		if e := s.events[i]; typ == "" || matchesType(typ, e.typ) {
			matching = append(matching, e)
		}
	}
	start, end := 0, len(matching)
	if after := f.Get("starting_after"); after != "" {
		i := slices.IndexFunc(matching, func(e *event) bool { return e.id == after })
		if i < 0 {
			return nil, invalidRequest(http.StatusBadRequest, "resource_missing", "starting_after", fmt.Sprintf("No such event: '%s'", after))
		}
		start = i + 1
	}
	if before := f.Get("ending_before"); before != "" {
		i := slices.IndexFunc(matching, func(e *event) bool { return e.id == before })
		if i < 0 {
			return nil, invalidRequest(http.StatusBadRequest, "resource_missing", "ending_before", fmt.Sprintf("No such event: '%s'", before))
		}
		end = i
		// ending_before pages backwards: the page is the limit events just before it.
		start = max(0, end-int(limit))
	}
	page := matching[start:end]
	hasMore := len(page) > int(limit)
	if hasMore {
		page = page[:limit]
	}
	l := listJSON{Object: "list", Data: []any{}, HasMore: hasMore || (f.Get("ending_before") != "" && start > 0), URL: "/v1/events"}
	for _, e := range page {
		l.Data = append(l.Data, e.json(s.opts.APIVersion))
	}
	return l, nil
}
