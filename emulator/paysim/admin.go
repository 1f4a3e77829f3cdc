package paysim

import (
	"encoding/json"
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
//	POST /_sandbox/webhooks                {"mode": "duplicate", "count": 1, "delay": "2s"}
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
		writeJSON(w, http.StatusOK, map[string]any{"data": s.paymentIntentsJSON()})
	})
	mux.HandleFunc("GET /_sandbox/refunds", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"data": s.refundsJSON()})
	})
	mux.HandleFunc("GET /_sandbox/webhooks", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"fault": faultJSON(s.webhooks.currentFault()), "deliveries": s.webhooks.log()})
	})
	mux.HandleFunc("POST /_sandbox/webhooks", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Mode  string `json:"mode"`
			Count int    `json:"count"`
			Delay string `json:"delay"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			adminError(w, fmt.Errorf("decode body: %w", err))
			return
		}
		f := WebhookFault{Mode: req.Mode, Count: req.Count}
		if req.Delay != "" {
			var err error
			if f.Delay, err = time.ParseDuration(req.Delay); err != nil {
				adminError(w, err)
				return
			}
		}
		if err := s.SetWebhookFault(f); err != nil {
			adminError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"fault": faultJSON(s.webhooks.currentFault())})
	})
}

func faultJSON(f WebhookFault) map[string]any {
	m := map[string]any{"mode": f.Mode}
	if f.Count > 0 {
		m["count"] = f.Count
	}
	if f.Delay > 0 {
		m["delay"] = f.Delay.String()
	}
	return m
}

func adminError(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]string{"message": err.Error()}})
}

// SetWebhookFault changes how the next events are delivered (see WebhookFault).
func (s *Server) SetWebhookFault(f WebhookFault) error { return s.webhooks.setFault(f) }

// Deliveries returns the webhook delivery log, oldest first.
func (s *Server) Deliveries() []Delivery { return s.webhooks.log() }

func (s *Server) paymentIntentsJSON() []paymentIntentJSON {
	s.mu.Lock()
	s.tickLocked() // a read-back must not show authorizations that have lapsed
	out := make([]paymentIntentJSON, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.intents[id].json())
	}
	evs := s.takeFreshLocked()
	s.mu.Unlock()
	s.webhooks.send(evs, s.opts.APIVersion)
	return out
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
