package paysim

import (
	"encoding/json"
	"strings"
	"time"
)

// event is a Stripe Event. Its object is a snapshot taken when the event was created, as
// Stripe's events are.
type event struct {
	id        string
	typ       string
	created   time.Time
	object    json.RawMessage
	requestID string // empty for changes the clock made
	idemKey   string
	webhooks  int            // pending_webhooks at creation: 1 with a webhook URL, else 0
	saved     memo[struct{}] // its snapshot record (persist.go)
}

type eventJSON struct {
	ID              string           `json:"id"`
	Object          string           `json:"object"`
	APIVersion      string           `json:"api_version"`
	Created         int64            `json:"created"`
	Data            eventDataJSON    `json:"data"`
	Livemode        bool             `json:"livemode"`
	PendingWebhooks int              `json:"pending_webhooks"`
	Request         eventRequestJSON `json:"request"`
	Type            string           `json:"type"`
}

type eventDataJSON struct {
	Object json.RawMessage `json:"object"`
}

type eventRequestJSON struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

func (e *event) json(apiVersion string) eventJSON {
	j := eventJSON{
		ID: e.id, Object: "event", APIVersion: apiVersion, Created: e.created.Unix(),
		Data: eventDataJSON{Object: e.object}, PendingWebhooks: e.webhooks, Type: e.typ,
	}
	if e.requestID != "" {
		j.Request.ID = &e.requestID
	}
	if e.idemKey != "" {
		j.Request.IdempotencyKey = &e.idemKey
	}
	return j
}

// matchesType reports whether an event type matches a list filter: an exact type or a
// wildcard such as "payment_intent.*".
func matchesType(filter, typ string) bool {
	if prefix, ok := strings.CutSuffix(filter, "*"); ok {
		return strings.HasPrefix(typ, prefix)
	}
	return filter == typ
}

// emitLocked records a Stripe event about obj (marshalled now) and queues it for delivery once
// the current request releases the lock.
func (s *Server) emitLocked(typ string, obj any) {
	e := &event{id: newID("evt"), typ: typ, created: s.nowLocked(), object: mustJSON(obj),
		requestID: s.cur.requestID, idemKey: s.cur.idemKey}
	deliver := s.opts.WebhookURL != "" && s.subscribed(typ)
	if deliver {
		e.webhooks = 1
	}
	s.events = append(s.events, e)
	s.byEvent[e.id] = e
	if deliver {
		s.queueLocked(s.stripeMessage(e))
	}
}

// subscribed reports whether the Stripe endpoint takes events of typ (Options.WebhookEvents).
func (s *Server) subscribed(typ string) bool {
	if len(s.opts.WebhookEvents) == 0 {
		return true
	}
	for _, f := range s.opts.WebhookEvents {
		if matchesType(f, typ) {
			return true
		}
	}
	return false
}

// stripeMessage is the webhook delivery of e: pretty-printed, as Stripe sends events.
func (s *Server) stripeMessage(e *event) message {
	payload, err := json.MarshalIndent(e.json(s.opts.APIVersion), "", "  ")
	if err != nil {
		panic(err) // our own JSON types
	}
	return message{eventID: e.id, eventType: e.typ, payload: payload, to: s.stripeHooks}
}

// queueLocked hands m to the webhooks once the current request releases the lock, and counts
// its event undelivered until its delivery ends (see deliveryEnded).
func (s *Server) queueLocked(m message) {
	s.dirty = true
	if m.to.url != "" {
		s.undelivered[m.eventID] = true
	}
	s.fresh = append(s.fresh, m)
}

// deliveryEnded records that a delivery of the event was delivered, failed for good or was
// dropped. It is saved with the next write (or by Close), not on its own: after a kill -9 an
// event whose delivery ended since the last write is delivered again, a duplicate that
// at-least-once delivery allows.
func (s *Server) deliveryEnded(eventID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.undelivered[eventID] {
		delete(s.undelivered, eventID)
		s.dirty = true
	}
}
