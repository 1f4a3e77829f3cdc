package paysim

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RetryPolicy controls webhook redelivery. Stripe retries for up to three days in live mode
// (three times over a few hours in a sandbox); the defaults here are scaled down so that a
// local run sees retries within seconds.
type RetryPolicy struct {
	MaxAttempts int           // attempts per delivery, the first included; default 4
	MinBackoff  time.Duration // gap before the first retry; default 1 s, doubled each retry
	MaxBackoff  time.Duration // largest gap; default 1 min
	Timeout     time.Duration // per attempt; default 10 s
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 4
	}
	if p.MinBackoff <= 0 {
		p.MinBackoff = time.Second
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = time.Minute
	}
	if p.MaxBackoff < p.MinBackoff {
		p.MaxBackoff = p.MinBackoff
	}
	if p.Timeout <= 0 {
		p.Timeout = 10 * time.Second
	}
	return p
}

// Backoff is the gap before retry k (k = 1 is the first retry).
func (p RetryPolicy) Backoff(k int) time.Duration {
	d := p.MinBackoff
	for i := 1; i < k && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

// Webhook fault modes, for testing how a receiver copes with what the providers' at-least-once,
// unordered delivery allows.
const (
	FaultNone      = "none"      // deliver each event once, at once
	FaultDuplicate = "duplicate" // deliver each event twice (two independent deliveries)
	FaultDrop      = "drop"      // never deliver (the event stays retrievable through the API)
	FaultDelay     = "delay"     // hold each delivery for Delay before its first attempt
	FaultReorder   = "reorder"   // hold each event back until the next one has been attempted
)

// WebhookFault selects a fault for the next Count events (0: until changed) of one dialect
// ("" for both; events of the other dialect are delivered normally and not counted).
type WebhookFault struct {
	Mode    string        `json:"mode"`
	Count   int           `json:"count,omitempty"`
	Delay   time.Duration `json:"delay,omitempty"`
	Dialect string        `json:"dialect,omitempty"`
}

// Delivery is one delivery of an event to its dialect's webhook URL, with its attempts.
type Delivery struct {
	ID        string    `json:"id"`
	Dialect   string    `json:"dialect"`
	EventID   string    `json:"event_id"`
	EventType string    `json:"event_type"`
	Fault     string    `json:"fault,omitempty"`
	State     string    `json:"state"` // pending, held, delivered, failed, dropped
	Attempts  []Attempt `json:"attempts"`
}

// Attempt is one POST of a delivery.
type Attempt struct {
	At     time.Time `json:"at"`
	Status int       `json:"status,omitempty"` // HTTP status; 0 on a connection error
	Error  string    `json:"error,omitempty"`
}

// webhookTarget is where one dialect's events go and how each attempt is dressed and signed.
type webhookTarget struct {
	dialect string
	url     string // "": the dialect's events are not delivered
	// header sets an attempt's headers (content type, user agent, signature) at time now.
	header func(h http.Header, d *Delivery, payload []byte, now time.Time)
}

// message is an event ready for delivery: its payload is what is POSTed.
type message struct {
	eventID, eventType string
	payload            []byte
	to                 *webhookTarget
}

// webhooks delivers the events of every dialect, each to its target, at least once, with
// retries and injected faults. One delivery log and one fault serve both dialects.
type webhooks struct {
	policy RetryPolicy
	logf   func(string, ...any)
	client *http.Client
	// ended is told, without w.mu held, the event of each delivery that was delivered, failed
	// for good or was dropped (not of one cut short by close).
	ended func(eventID string)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	fault      WebhookFault
	left       int // events the fault still applies to, when fault.Count > 0
	held       *delivery
	deliveries []*delivery
}

// delivery is the running state of a Delivery.
type delivery struct {
	Delivery
	to        *webhookTarget
	payload   []byte
	firstDone chan struct{} // closed after the first attempt (or when it never happens)
	closeOnce sync.Once
}

func (d *delivery) markFirstDone() { d.closeOnce.Do(func() { close(d.firstDone) }) }

func newWebhooks(policy RetryPolicy, logf func(string, ...any), ended func(eventID string)) *webhooks {
	ctx, cancel := context.WithCancel(context.Background())
	return &webhooks{
		policy: policy, logf: logf, ended: ended,
		client: &http.Client{Timeout: policy.Timeout},
		ctx:    ctx, cancel: cancel,
		fault: WebhookFault{Mode: FaultNone},
	}
}

func (w *webhooks) close() {
	w.cancel()
	w.wg.Wait()
}

// setFault changes the fault mode. An event held back for reordering is released.
func (w *webhooks) setFault(f WebhookFault) error {
	checked, err := checkFault("webhook", APIFault(f), FaultDelay, FaultNone, FaultDuplicate, FaultDrop, FaultDelay, FaultReorder)
	if err != nil {
		return err
	}
	f = WebhookFault(checked)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fault, w.left = f, f.Count
	if w.held != nil && f.Mode != FaultReorder {
		w.startLocked(w.held, 0, nil)
		w.held = nil
	}
	return nil
}

func (w *webhooks) currentFault() WebhookFault {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fault
}

// log returns a copy of every delivery so far, oldest first.
func (w *webhooks) log() []Delivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Delivery, len(w.deliveries))
	for i, d := range w.deliveries {
		out[i] = d.Delivery
		out[i].Attempts = append([]Attempt(nil), d.Attempts...)
	}
	return out
}

// send starts the delivery of msgs (in order), applying the current fault to each message of
// the dialect it is scoped to.
func (w *webhooks) send(msgs []message) {
	var dropped []string
	defer func() {
		for _, id := range dropped {
			w.ended(id)
		}
	}()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range msgs {
		if m.to.url == "" {
			continue
		}
		f := WebhookFault{Mode: FaultNone}
		if appliesTo(w.fault.Dialect, m.to.dialect) {
			f = w.fault
			if w.fault.Count > 0 {
				if w.left--; w.left <= 0 {
					w.fault = WebhookFault{Mode: FaultNone}
				}
			}
		}
		newDelivery := func() *delivery {
			// Random, not numbered, so that ids stay unique across restarts with a DataDir.
			d := &delivery{Delivery: Delivery{
				ID: newID("whd"), Dialect: m.to.dialect, EventID: m.eventID, EventType: m.eventType,
				State: "pending", Attempts: []Attempt{},
			}, to: m.to, payload: m.payload, firstDone: make(chan struct{})}
			if f.Mode != FaultNone {
				d.Fault = f.Mode
			}
			w.deliveries = append(w.deliveries, d)
			return d
		}
		switch f.Mode {
		case FaultDrop:
			d := newDelivery()
			d.State = "dropped"
			d.markFirstDone()
			dropped = append(dropped, d.EventID)
		case FaultDuplicate:
			w.startLocked(newDelivery(), 0, nil)
			w.startLocked(newDelivery(), 0, nil)
		case FaultDelay:
			w.startLocked(newDelivery(), f.Delay, nil)
		case FaultReorder:
			d := newDelivery()
			if w.held == nil {
				d.State = "held"
				w.held = d
				continue
			}
			older := w.held
			w.held = nil
			w.startLocked(d, 0, nil)
			w.startLocked(older, 0, d.firstDone)
		default:
			w.startLocked(newDelivery(), 0, nil)
		}
		if w.held != nil && w.fault.Mode != FaultReorder {
			w.startLocked(w.held, 0, nil) // the reorder fault just ran out
			w.held = nil
		}
	}
}

// startLocked runs d in its own goroutine: after wait, and once after (if not nil) is closed.
func (w *webhooks) startLocked(d *delivery, wait time.Duration, after <-chan struct{}) {
	d.State = "pending"
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer d.markFirstDone()
		if after != nil {
			select {
			case <-after:
			case <-w.ctx.Done():
				return
			}
		}
		for attempt := 1; ; attempt++ {
			if wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-w.ctx.Done():
					t.Stop()
					return
				}
			}
			a := w.post(d)
			if a.Status == 0 && w.ctx.Err() != nil {
				return // cut short by close: the delivery has not ended (a DataDir re-queues it)
			}
			w.mu.Lock()
			d.Attempts = append(d.Attempts, a)
			ok := a.Status >= 200 && a.Status < 300
			switch {
			case ok:
				d.State = "delivered"
			case attempt >= w.policy.MaxAttempts:
				d.State = "failed"
			}
			w.mu.Unlock()
			d.markFirstDone()
			w.logf("paysim: webhook %s %s attempt %d: status %d %s", d.EventID, d.EventType, attempt, a.Status, a.Error)
			if ok || attempt >= w.policy.MaxAttempts {
				w.ended(d.EventID)
				return
			}
			wait = w.policy.Backoff(attempt)
		}
	}()
}

// post makes one attempt of d, dressed and signed by its target at the current wall-clock time.
func (w *webhooks) post(d *delivery) Attempt {
	now := time.Now()
	a := Attempt{At: now}
	req, err := http.NewRequestWithContext(w.ctx, http.MethodPost, d.to.url, bytes.NewReader(d.payload))
	if err != nil {
		a.Error = err.Error()
		return a
	}
	d.to.header(req.Header, &d.Delivery, d.payload, now)
	resp, err := w.client.Do(req)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	a.Status = resp.StatusCode
	return a
}

// stripeTarget delivers Stripe events as Stripe does, signed with Stripe-Signature.
func stripeTarget(url, secret string) *webhookTarget {
	return &webhookTarget{dialect: DialectStripe, url: url, header: func(h http.Header, _ *Delivery, payload []byte, now time.Time) {
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
		h.Set("Accept", "*/*; q=0.5, application/xml")
		h.Set("Cache-Control", "no-cache")
		h.Set("Stripe-Signature", SignatureHeader(payload, secret, now))
	}}
}

// SignatureHeader is the Stripe-Signature header for payload signed with secret at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<payload>">".
func SignatureHeader(payload []byte, secret string, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hmacHex(secret, []byte(ts), []byte("."), payload)
}

// hmacHex is the hex HMAC-SHA256 of the parts, one after the other, keyed with secret: the MAC
// both providers sign webhooks with.
func hmacHex(secret string, parts ...[]byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	for _, p := range parts {
		mac.Write(p)
	}
	return hex.EncodeToString(mac.Sum(nil))
}
