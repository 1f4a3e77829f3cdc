package paysim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Admin endpoints, under /_sandbox/ and without authentication (a real provider has no such
// endpoints; tests and local tools use them):
//
//	GET  /_sandbox/clock                   {"now": unix}
//	POST /_sandbox/clock/advance           {"seconds": N} or {"duration": "168h"} -> {"now": unix}
//	GET  /_sandbox/payment_intents         {"data": [PaymentIntent...]} in creation order
//	GET  /_sandbox/refunds                 {"data": [Refund...]} in creation order
//	GET  /_sandbox/webhooks                {"fault": {...}, "deliveries": [Delivery...]}
//	POST /_sandbox/webhooks                {"mode": "duplicate", "count": 1, "delay": "2s", "dialect": "komoju"}
//	GET  /_sandbox/faults                  {"fault": {...}}: the API fault
//	POST /_sandbox/faults                  {"mode": "error", "count": 1, "delay": "3s", "dialect": "stripe"}
//	GET  /_sandbox/komoju/payments         {"data": [Payment...]} in creation order
//	GET  /_sandbox/komoju/payments/{id}    the Payment (a slip's instructions_url)
//	POST /_sandbox/komoju/payments/{id}/pay  the customer pays the slip -> the Payment, captured
//	POST /_sandbox/komoju/payments/{id}/payout         KOMOJU pays the refund request out -> the Payment
//	POST /_sandbox/komoju/payments/{id}/reject_refund  KOMOJU rejects the refund request -> the Payment
//	GET  /_sandbox/komoju/wallets          {"data": {"ali": {"available": N, "held": N}, ...}}
func (s *Server) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /_sandbox/clock", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int64{"now": s.Now().Unix()})
	})
	mux.HandleFunc("POST /_sandbox/clock/advance", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Seconds  int64  `json:"seconds"`
			Duration string `json:"duration"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			adminError(w, fmt.Errorf("decode body: %w", err))
			return
		}
		d := time.Duration(req.Seconds) * time.Second
		if req.Duration != "" {
			var err error
			if d, err = time.ParseDuration(req.Duration); err != nil {
				adminError(w, err)
				return
			}
		}
		now, err := s.AdvanceClock(d)
		if err != nil {
			adminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]int64{"now": now.Unix()})
	})
	mux.HandleFunc("GET /_sandbox/payment_intents", func(w http.ResponseWriter, r *http.Request) {
		intents, err := s.paymentIntentsJSON()
		if err != nil {
			adminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": intents})
	})
	mux.HandleFunc("GET /_sandbox/refunds", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"data": s.refundsJSON()})
	})
	mux.HandleFunc("GET /_sandbox/webhooks", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"fault": faultJSON(s.webhooks.currentFault()), "deliveries": s.webhooks.log()})
	})
	mux.HandleFunc("POST /_sandbox/webhooks", func(w http.ResponseWriter, r *http.Request) {
		f, err := decodeFault(r)
		if err != nil {
			adminError(w, err)
			return
		}
		if err := s.SetWebhookFault(WebhookFault(f)); err != nil {
			adminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"fault": faultJSON(s.webhooks.currentFault())})
	})
	mux.HandleFunc("GET /_sandbox/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"fault": faultJSON(WebhookFault(s.faults.current()))})
	})
	mux.HandleFunc("POST /_sandbox/faults", func(w http.ResponseWriter, r *http.Request) {
		f, err := decodeFault(r)
		if err != nil {
			adminError(w, err)
			return
		}
		if err := s.SetAPIFault(f); err != nil {
			adminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"fault": faultJSON(WebhookFault(s.faults.current()))})
	})
	mux.HandleFunc("GET /_sandbox/komoju/payments", func(w http.ResponseWriter, r *http.Request) {
		payments, err := s.komojuPaymentsJSON()
		if err != nil {
			adminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": payments})
	})
	mux.HandleFunc("GET /_sandbox/komoju/payments/{id}", func(w http.ResponseWriter, r *http.Request) {
		payments, err := s.komojuPaymentsJSON()
		if err != nil {
			adminError(w, err)
			return
		}
		for _, p := range payments {
			if p.ID == r.PathValue("id") {
				writeJSON(w, http.StatusOK, p)
				return
			}
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{"message": "no such payment " + r.PathValue("id")}})
	})
	mux.HandleFunc("POST /_sandbox/komoju/payments/{id}/pay", func(w http.ResponseWriter, r *http.Request) {
		p, err := s.payKomojuSlip(r.PathValue("id"))
		if err != nil {
			adminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
	})
	for path, settle := range map[string]func(string) (komojuPaymentJSON, error){
		"payout": s.payOutKomojuRefund, "reject_refund": s.rejectKomojuRefund,
	} {
		mux.HandleFunc("POST /_sandbox/komoju/payments/{id}/"+path, func(w http.ResponseWriter, r *http.Request) {
			p, err := settle(r.PathValue("id"))
			if err != nil {
				adminError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, p)
		})
	}
	mux.HandleFunc("GET /_sandbox/komoju/wallets", func(w http.ResponseWriter, r *http.Request) {
		type walletJSON struct {
			Available int64 `json:"available"`
			Held      int64 `json:"held"`
		}
		s.mu.Lock()
		out := map[string]walletJSON{}
		for customer, wl := range s.komoju.wallets {
			out[customer] = walletJSON{Available: wl.available, Held: wl.held}
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"data": out})
	})
}

// decodeFault reads the body of POST /_sandbox/webhooks and /_sandbox/faults, which share a
// shape: {"mode", "count", "delay" (a Go duration), "dialect"}; so do WebhookFault and
// APIFault, which convert into each other.
func decodeFault(r *http.Request) (APIFault, error) {
	var req struct {
		Mode    string `json:"mode"`
		Count   int    `json:"count"`
		Delay   string `json:"delay"`
		Dialect string `json:"dialect"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return APIFault{}, fmt.Errorf("decode body: %w", err)
	}
	f := APIFault{Mode: req.Mode, Count: req.Count, Dialect: req.Dialect}
	if req.Delay != "" {
		var err error
		if f.Delay, err = time.ParseDuration(req.Delay); err != nil {
			return APIFault{}, err
		}
	}
	return f, nil
}

func faultJSON(f WebhookFault) map[string]any {
	m := map[string]any{"mode": f.Mode}
	if f.Count > 0 {
		m["count"] = f.Count
	}
	if f.Delay > 0 {
		m["delay"] = f.Delay.String()
	}
	if f.Dialect != "" {
		m["dialect"] = f.Dialect
	}
	return m
}

// adminError answers 400 for a request the sandbox refuses, 500 for a change it could not save.
func adminError(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	if errors.Is(err, errNotSaved) {
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"message": err.Error()}})
}

// SetWebhookFault changes how the next events are delivered (see WebhookFault).
func (s *Server) SetWebhookFault(f WebhookFault) error { return s.webhooks.setFault(f) }

// Deliveries returns the webhook delivery log of both dialects, oldest first.
func (s *Server) Deliveries() []Delivery { return s.webhooks.log() }

// SetAPIFault changes how the next API requests are answered (see APIFault).
func (s *Server) SetAPIFault(f APIFault) error { return s.faults.set(f) }

// PayKomojuSlip stands for the customer paying the konbini or bank transfer slip of the KOMOJU
// payment id: it becomes captured, and a payment.captured event is sent.
func (s *Server) PayKomojuSlip(id string) error {
	_, err := s.payKomojuSlip(id)
	return err
}

func (s *Server) payKomojuSlip(id string) (j komojuPaymentJSON, err error) {
	serr := s.ticked(func() { // a slip past its deadline has expired and can no longer be paid
		p, ok := s.komoju.payments[id]
		if !ok {
			err = fmt.Errorf("no KOMOJU payment %s", id)
			return
		}
		if kerr := p.pay(s.nowLocked()); kerr != nil {
			err = kerr
		} else {
			s.emitKomojuLocked("payment.captured", p, "")
		}
		j = p.json()
	})
	if err == nil {
		err = serr
	}
	return j, err
}

// PayOutKomojuRefund stands for KOMOJU paying out the pending refund request of the KOMOJU
// payment id now, before the clock would (Options.KomojuRefundPayout): the request is completed,
// the refund recorded and, if it was all that was left, the payment refunded, with the events
// refund_request.updated, payment.refund.created and payment.refunded.
func (s *Server) PayOutKomojuRefund(id string) error {
	_, err := s.payOutKomojuRefund(id)
	return err
}

// RejectKomojuRefund stands for KOMOJU rejecting the pending refund request of the KOMOJU
// payment id (the customer's bank account was wrong, say): the request is rejected, the payment
// stays captured, and refund_request.updated is the only event.
func (s *Server) RejectKomojuRefund(id string) error {
	_, err := s.rejectKomojuRefund(id)
	return err
}

func (s *Server) payOutKomojuRefund(id string) (komojuPaymentJSON, error) {
	return s.settleKomojuRefund(id, s.payOutLocked)
}

func (s *Server) rejectKomojuRefund(id string) (komojuPaymentJSON, error) {
	return s.settleKomojuRefund(id, s.rejectRefundLocked)
}

// settleKomojuRefund applies settle to the pending refund request of the KOMOJU payment id.
func (s *Server) settleKomojuRefund(id string, settle func(*komojuPayment, *komojuRefundRequest)) (j komojuPaymentJSON, err error) {
	serr := s.ticked(func() { // a request the clock has paid out already is no longer pending
		p, ok := s.komoju.payments[id]
		if !ok {
			err = fmt.Errorf("no KOMOJU payment %s", id)
			return
		}
		r := p.openRefundRequest()
		if r == nil {
			err = fmt.Errorf("KOMOJU payment %s (%s) has no pending refund request", id, p.status)
			return
		}
		settle(p, r)
		j = p.json()
	})
	if err == nil {
		err = serr
	}
	return j, err
}

// payOutLocked completes p's pending refund request r and sends its events.
func (s *Server) payOutLocked(p *komojuPayment, r *komojuRefundRequest) {
	p.payOut(r, newKomojuID(), s.nowLocked())
	s.emitKomojuDataLocked("refund_request.updated", r.json(p.id), "")
	s.emitKomojuLocked("payment.refund.created", p, "")
	if p.status == komojuRefunded {
		s.emitKomojuLocked("payment.refunded", p, "")
	}
}

// rejectRefundLocked rejects p's pending refund request r: the money stays with the merchant.
func (s *Server) rejectRefundLocked(p *komojuPayment, r *komojuRefundRequest) {
	r.status = refundRequestRejected
	s.emitKomojuDataLocked("refund_request.updated", r.json(p.id), "")
}

// PaymentIntentIDs returns, in creation order, the ids of the PaymentIntents whose metadata has
// key = value: what a reconciliation asks of the provider ("how many intents exist for this
// payment?"), as GET /_sandbox/payment_intents reads back everything.
func (s *Server) PaymentIntentIDs(key, value string) ([]string, error) {
	pis, err := s.paymentIntentsJSON()
	var ids []string
	for _, pi := range pis {
		if pi.Metadata[key] == value {
			ids = append(ids, pi.ID)
		}
	}
	return ids, err
}

// WalletBalance is the PayPay wallet of customer: what is available and what authorizations
// hold (both 0 for a customer without a wallet).
func (s *Server) WalletBalance(customer string) (available, held int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.komoju.wallets[customer]; w != nil {
		return w.available, w.held
	}
	return 0, 0
}

func (s *Server) komojuPaymentsJSON() ([]komojuPaymentJSON, error) {
	out := []komojuPaymentJSON{}
	err := s.ticked(func() { // a read-back must not show slips that have expired
		for _, id := range s.komoju.order {
			out = append(out, s.komoju.payments[id].json())
		}
	})
	return out, err
}

func (s *Server) paymentIntentsJSON() ([]paymentIntentJSON, error) {
	out := []paymentIntentJSON{}
	err := s.ticked(func() { // a read-back must not show authorizations that have lapsed
		for _, id := range s.order {
			out = append(out, s.intents[id].json())
		}
	})
	return out, err
}

// ticked runs f under s.mu once what the clock made due is applied, writes what both changed
// (with a DataDir; the error is errNotSaved's) and delivers the events they created once the
// lock is released.
func (s *Server) ticked(f func()) error {
	s.mu.Lock()
	s.tickLocked()
	f()
	err := s.saveLocked()
	msgs := s.takeFreshLocked()
	s.mu.Unlock()
	s.webhooks.send(msgs)
	return err
}

func (s *Server) refundsJSON() []refundJSON {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]refundJSON, 0, len(s.rorder))
	for _, id := range s.rorder {
		out = append(out, s.refunds[id].json())
	}
	return out
}
