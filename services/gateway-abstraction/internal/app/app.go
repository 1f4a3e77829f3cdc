// Package app holds the gateway's use cases: recording, in the consumer's transaction, a payment
// request and its authorize intent (order.awaiting_payment), the capture of a shipped order's
// payment (order.shipped) and the settlement of a cancelled order's money (order.cancelled: a
// void or a refund); carrying those intents out against the provider after the commit; applying
// provider webhooks once each; and the reconciliation sweep. It declares what it needs from the
// outside (Repository, Tx, Nudger, the providers) and knows nothing of HTTP or Spanner.
//
// Every provider call follows docs/architecture.md, "Side effects outside Spanner": the intent
// (ProviderRequests row, with the exact request and its idempotency key) commits first; the call
// is made after the commit; its answer and the payment's event commit in a second transaction. A
// crash between any two steps leaves a STARTED intent that a redelivery of the event (After in
// package events) or the sweep resumes with the same key, so the provider acts once.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spanmart/spanmart/pkg/faults"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/breaker"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/provider"
)

// Errors of the use cases; test with errors.Is.
var (
	// ErrUnknownProvider: a webhook path or a payment names a provider the gateway has no adapter for.
	ErrUnknownProvider = errors.New("unknown provider")
)

// Operation is what an intent asks the provider to do; the values are those of the
// CK_ProviderRequests_Operation check.
type Operation string

const (
	OpAuthorize Operation = "AUTHORIZE"
	OpCapture   Operation = "CAPTURE"
	OpVoid      Operation = "VOID"
	OpRefund    Operation = "REFUND"
)

// IntentStatus is an intent's state: STARTED until the provider answered, then SUCCEEDED (an
// answer, a refusal included) or FAILED (the call cannot be made: an invalid request, or the
// provider stayed unreachable for GiveUpAfter).
type IntentStatus string

const (
	IntentStarted   IntentStatus = "STARTED"
	IntentSucceeded IntentStatus = "SUCCEEDED"
	IntentFailed    IntentStatus = "FAILED"
)

// Intent is a provider call recorded before it is made (a ProviderRequests row).
type Intent struct {
	Key        string // the idempotency key sent to the provider: "<payment id>:<operation>"
	PaymentID  string
	Op         Operation
	Status     IntentStatus
	Attempts   int64
	Request    json.RawMessage // the call's parameters (provider.AuthorizeRequest or provider.Operation)
	LastError  string
	RetryAfter time.Time // when the sweep resumes it; zero once finished
	CreatedAt  time.Time // when it was recorded (the commit); set by the repository
}

// IntentKey is the idempotency key of operation op on payment paymentID.
func IntentKey(paymentID string, op Operation) string {
	return paymentID + ":" + string(op)
}

// paymentNamespace derives payment ids from order ids: the payment of an order has one id,
// however often its order.awaiting_payment is delivered or replayed.
var paymentNamespace = uuid.MustParse("5b0c5b1e-6d1f-4a53-9a8e-3f1f0c2d7a10")

// PaymentIDFor is the id of the payment of order orderID.
func PaymentIDFor(orderID string) string {
	return uuid.NewSHA1(paymentNamespace, []byte(orderID)).String()
}

// ProviderEvent is a verified webhook, recorded once (ProviderEvents).
type ProviderEvent struct {
	Provider  string
	EventID   string
	EventType string
	PaymentID string // "" when the gateway has no such payment
	Payload   []byte
}

// Tx is the repository bound to one read-write transaction: the consumer's (RequestPayment) or one
// that Repository.Update opens. Payments written by Save carry their emitted events to the
// outbox in the same transaction.
type Tx interface {
	// Payment returns a payment, locked for this transaction (the store reads it exclusively:
	// every transaction that reads a payment goes on to write it); payment.ErrNotFound if there is
	// none.
	Payment(ctx context.Context, id string) (*payment.Payment, error)
	// PaymentByProviderID returns the payment a provider knows by providerPaymentID.
	PaymentByProviderID(ctx context.Context, providerName, providerPaymentID string) (*payment.Payment, error)
	// PaymentWithIntent returns a payment and the intent of key, both locked for this
	// transaction as Payment locks a payment, in one read; payment.ErrNotFound if either is
	// missing.
	PaymentWithIntent(ctx context.Context, id, key string) (*payment.Payment, Intent, error)
	// RecordProviderEvent inserts e unless the provider's event id is known: fresh is false for a
	// duplicate (INSERT OR IGNORE).
	RecordProviderEvent(ctx context.Context, e ProviderEvent) (fresh bool, err error)
	// Save writes p (inserted when created) and its emitted events. checkAfter is when the sweep
	// asks the provider about p; zero for never (p is terminal, or an intent covers it).
	Save(ctx context.Context, p *payment.Payment, created bool, checkAfter time.Time) error
	// SaveIntent writes in (inserted when created).
	SaveIntent(ctx context.Context, in Intent, created bool) error
}

// Repository is the persistence the use cases need outside a consumer's transaction.
type Repository interface {
	// Update runs fn in a new read-write transaction, which may be retried: fn must have no
	// effect outside tx.
	Update(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// Intent reads an intent (a strong read); payment.ErrNotFound if there is none.
	Intent(ctx context.Context, key string) (Intent, error)
	// Intents reads the intents of keys in one strong read, by key; a key without an intent
	// has no entry.
	Intents(ctx context.Context, keys []string) (map[string]Intent, error)
	// Payment reads a payment; payment.ErrNotFound if there is none.
	Payment(ctx context.Context, id string) (*payment.Payment, error)
	// PaymentsOfOrder returns an order's payments (none: an empty slice).
	PaymentsOfOrder(ctx context.Context, orderID string) ([]*payment.Payment, error)
	// IntentsToResume returns up to limit STARTED intents whose RetryAfter is at or before now.
	IntentsToResume(ctx context.Context, now time.Time, limit int) ([]Intent, error)
	// PaymentsToCheck returns up to limit payments whose CheckAfter is at or before now.
	PaymentsToCheck(ctx context.Context, now time.Time, limit int) ([]*payment.Payment, error)
}

// Nudger tells the relay that a payment's events are waiting; best effort.
type Nudger interface {
	NudgeAggregate(ctx context.Context, paymentID string)
}

// Config configures a Service. Zero durations take the defaults.
type Config struct {
	Repo      Repository
	Providers []provider.Provider
	Nudger    Nudger // may be nil
	Metrics   *Metrics
	Now       func() time.Time // default time.Now
	// Calls bounds and spaces the attempts of one provider call on the request path, and opens a
	// circuit per provider after consecutive failures.
	Calls CallPolicy
	// ResumeAfter is how long a STARTED intent waits for the request path before the sweep may
	// resume it (and the back-off unit between resumptions); default 1m.
	ResumeAfter time.Duration
	// GiveUpAfter is how long after it was recorded an intent whose calls keep failing
	// temporarily is given up (the payment's authorization, capture, void or refund fails with
	// provider_unavailable); default and most 23h.
	// It must stay inside the providers' idempotency-key retention (Stripe keeps keys 24 h):
	// after that, the same call could act a second time.
	GiveUpAfter time.Duration
	// ReconcileAfter is how long a payment may stay in a state that waits for the provider
	// (3-D Secure, a slip, a refund not paid out yet) before the sweep asks the provider about
	// it, and again after each answer that it still waits; default 15m.
	ReconcileAfter time.Duration
}

// MaxGiveUpAfter bounds Config.GiveUpAfter: an hour short of Stripe's 24 h key retention.
const MaxGiveUpAfter = 23 * time.Hour

// AuthorizationCheckAfter is when the sweep asks the provider about an authorized payment that has
// not been captured: card authorizations (and the sandbox's PayPay holds) lapse after 7 days, and
// before that nothing changes at the provider that the gateway does not hear of.
const AuthorizationCheckAfter = 7*24*time.Hour + time.Hour

// Service runs the use cases.
type Service struct {
	cfg       Config
	providers map[string]*guarded
}

// New returns a service.
func New(cfg Config) (*Service, error) {
	if cfg.Repo == nil || len(cfg.Providers) == 0 {
		return nil, errors.New("gateway: a repository and at least one provider are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.ResumeAfter <= 0 {
		cfg.ResumeAfter = time.Minute
	}
	if cfg.GiveUpAfter <= 0 || cfg.GiveUpAfter > MaxGiveUpAfter {
		cfg.GiveUpAfter = MaxGiveUpAfter
	}
	if cfg.ReconcileAfter <= 0 {
		cfg.ReconcileAfter = 15 * time.Minute
	}
	cfg.Calls = cfg.Calls.withDefaults()
	s := &Service{cfg: cfg, providers: map[string]*guarded{}}
	for _, p := range cfg.Providers {
		s.providers[p.Name()] = newGuarded(p, cfg.Calls, cfg.Metrics, cfg.Now)
	}
	return s, nil
}

// PaymentRequest is what order.awaiting_payment asks for.
type PaymentRequest struct {
	OrderID     string
	CustomerID  string
	Email       string
	Method      payment.Method
	Instrument  string // card: the PaymentMethod id; konbini: the store
	AmountMinor int64
	Currency    string
}

// RequestPayment records, in the consumer's transaction tx, the order's payment (REQUESTED) and
// its authorize intent, unless the order has one already (a replayed event; rec is nil then). The
// provider is called after the commit by ResumePayment, given rec. An invalid request is
// payment.ErrInvalid.
func (s *Service) RequestPayment(ctx context.Context, tx Tx, r PaymentRequest) (paymentID string, rec *Recorded, err error) {
	id := PaymentIDFor(r.OrderID)
	if _, err := tx.Payment(ctx, id); err == nil {
		return id, nil, nil
	} else if !errors.Is(err, payment.ErrNotFound) {
		return "", nil, err
	}
	p, err := payment.New(id, r.OrderID, r.CustomerID, r.Method, r.AmountMinor, r.Currency)
	if err != nil {
		return "", nil, err
	}
	if _, ok := s.providers[r.Method.Provider()]; !ok {
		return "", nil, fmt.Errorf("%w: %s (for %s payments)", ErrUnknownProvider, r.Method.Provider(), r.Method)
	}
	req := provider.AuthorizeRequest{
		IdempotencyKey: IntentKey(id, OpAuthorize), PaymentID: id, OrderID: r.OrderID, CustomerID: r.CustomerID,
		Email: r.Email, Method: r.Method, AmountMinor: r.AmountMinor, Currency: r.Currency, Instrument: r.Instrument,
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", nil, err
	}
	in := Intent{
		Key: req.IdempotencyKey, PaymentID: id, Op: OpAuthorize, Status: IntentStarted, Request: body,
		RetryAfter: s.cfg.Now().Add(s.cfg.ResumeAfter),
	}
	if err := tx.Save(ctx, p, true, time.Time{}); err != nil {
		return "", nil, err
	}
	if err := tx.SaveIntent(ctx, in, true); err != nil {
		return "", nil, err
	}
	return id, recorded(p, in), nil
}

// Resume carries out the intent key if it is still STARTED: calls the provider (with retries,
// back-off and the provider's circuit breaker) and records the answer and the payment's event;
// then, the same way, the intent that answer recorded, if any (the void of a payment whose order
// was cancelled while it was being authorized, the refund of a slip paid before its cancellation
// reached the provider). It returns nil once the intents are finished (now or before), and an
// error while one is not, so the caller's queue tries again; an intent that does not exist is
// finished by definition.
func (s *Service) Resume(ctx context.Context, key string) error {
	in, err := s.cfg.Repo.Intent(ctx, key)
	switch {
	case errors.Is(err, payment.ErrNotFound):
		return nil
	case err != nil:
		return err
	case in.Status != IntentStarted:
		return nil
	}
	return s.resumeFrom(ctx, in, "")
}

// resumeFrom is Resume of an intent just read STARTED (or just recorded), of a payment of
// providerName ("": read the payment to know).
func (s *Service) resumeFrom(ctx context.Context, in Intent, providerName string) error {
	next, err := s.resume(ctx, in, providerName)
	if err != nil || next == "" {
		return err
	}
	return s.Resume(ctx, next)
}

// resume carries out one STARTED intent (Resume) of a payment of providerName ("": read the
// payment to know) and returns the key of the intent its answer recorded, "" for none.
func (s *Service) resume(ctx context.Context, in Intent, providerName string) (string, error) {
	key := in.Key
	if providerName == "" {
		p, err := s.cfg.Repo.Payment(ctx, in.PaymentID)
		if err != nil {
			return "", err
		}
		providerName = p.Method().Provider()
	}
	prov, ok := s.providers[providerName]
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrUnknownProvider, providerName)
	}
	outcome, callErr := prov.do(ctx, in)
	if callErr == nil {
		faults.Hit(faults.GatewayAfterProviderCall)
	}
	emitted, unfinished, next := false, false, ""
	var rep *report
	paymentID := in.PaymentID
	err := s.cfg.Repo.Update(ctx, func(ctx context.Context, tx Tx) error {
		emitted, unfinished, next, rep = false, false, "", &report{}
		// The payment's lock (exclusive, see Tx.Payment) in the first statement: it is what the
		// provider's webhook for this answer contends for, and a transaction's age on Spanner is
		// its first statement's: taken first, the lock goes to the older of the two, and the
		// younger waits for it instead of being wounded by an older one that reached the row
		// later. The intent comes with it.
		p, in, err := tx.PaymentWithIntent(ctx, paymentID, key)
		if err != nil || in.Status != IntentStarted {
			return err // finished meanwhile (a concurrent Resume)
		}
		if !errors.Is(callErr, breaker.ErrOpen) {
			in.Attempts++ // calls made: the open circuit refused this one without calling
		}
		now := s.cfg.Now()
		switch {
		case callErr == nil:
			in.Status, in.LastError, in.RetryAfter = IntentSucceeded, "", time.Time{}
			if next, err = s.applyAnswer(ctx, tx, rep, p, prov.Name(), in, outcome); err != nil {
				return err
			}
		case provider.Temporary(callErr) && (in.CreatedAt.IsZero() || now.Sub(in.CreatedAt) < s.cfg.GiveUpAfter):
			in.LastError, in.RetryAfter = callErr.Error(), now.Add(s.backoff(max(in.Attempts, 1)))
			unfinished = true
		default:
			in.Status, in.LastError, in.RetryAfter = IntentFailed, callErr.Error(), time.Time{}
			s.giveUp(rep, p, in, callErr)
		}
		emitted = len(p.Emitted()) > 0
		if err := tx.Save(ctx, p, false, s.checkAfter(p, now)); err != nil {
			return err
		}
		return tx.SaveIntent(ctx, in, false)
	})
	if err != nil {
		return "", fmt.Errorf("record the provider's answer to %s: %w", key, err)
	}
	rep.publish(ctx)
	if emitted && s.cfg.Nudger != nil {
		s.cfg.Nudger.NudgeAggregate(ctx, in.PaymentID)
	}
	if unfinished {
		return "", fmt.Errorf("intent %s not finished: %w", key, callErr)
	}
	return next, nil
}

// applyAnswer applies the provider's answer to intent in and records, in tx, the intent that
// must follow it, returning its key ("" for none).
func (s *Service) applyAnswer(ctx context.Context, tx Tx, rep *report, p *payment.Payment, providerName string, in Intent, o provider.Outcome) (string, error) {
	if in.Op == OpVoid && o.Status == payment.Authorized && p.Status() == payment.VoidRequested && p.Method().UsesSlip() {
		// The customer paid the slip before its cancellation reached the provider: the money
		// is taken, and only a refund gives it back.
		rep.note(fmt.Sprintf("payment %s: the slip was paid before its cancellation reached %s: refunding it", p.ID(), providerName))
		in, err := s.recordIntent(ctx, tx, p, OpRefund)
		return in.Key, err
	}
	if !s.apply(rep, p, providerName, o, "answer") {
		return "", nil
	}
	return s.followUp(ctx, tx, p)
}

// followUp records, in tx, what a payment that has just moved must do next: the settlement (void)
// of a payment whose order was cancelled while it was being authorized, now that the provider
// holds it. It returns the intent's key, "" for none.
func (s *Service) followUp(ctx context.Context, tx Tx, p *payment.Payment) (string, error) {
	if !p.CancelRequested() {
		return "", nil
	}
	op, ok := settlement(p)
	if !ok {
		return "", nil // it failed: nothing is held
	}
	in, err := s.recordIntent(ctx, tx, p, op)
	return in.Key, err
}

// giveUp records an intent that cannot be carried out: the payment fails (its authorization,
// capture, void or refund) with the reason.
func (s *Service) giveUp(rep *report, p *payment.Payment, in Intent, callErr error) {
	reason := payment.ReasonProviderUnavailable
	var pe *provider.Error
	if errors.As(callErr, &pe) && pe.Reason != "" {
		reason = pe.Reason
	}
	var err error
	switch in.Op {
	case OpAuthorize:
		err = p.Fail(reason)
	case OpCapture:
		err = p.FailCapture(reason)
	case OpVoid:
		err = p.FailVoid(reason)
	case OpRefund:
		err = p.FailRefund(reason)
	}
	if err != nil {
		rep.note(fmt.Sprintf("payment %s: intent %s failed (%v) and the payment cannot record it: %v", p.ID(), in.Key, callErr, err))
	} else {
		rep.count(s.cfg.Metrics.transitions, p.Method().Provider(), string(p.Status()))
	}
	rep.count(s.cfg.Metrics.intentsFailed, p.Method().Provider(), string(in.Op))
}

// backoff is the wait before the attempt after the n-th: ResumeAfter doubling, capped at an hour.
func (s *Service) backoff(n int64) time.Duration {
	d := s.cfg.ResumeAfter
	for i := int64(1); i < n && d < time.Hour; i++ {
		d *= 2
	}
	return min(d, time.Hour)
}

// checkAfter is when the sweep asks the provider about p. Only a payment that waits for the
// provider or the customer is asked about: for an authorization, when it would lapse
// (AuthorizationCheckAfter); for one the customer must complete (3-D Secure), a slip, or a
// refund the provider accepted and has not paid out, after ReconcileAfter (again and again,
// each time it is still pending), or at the slip's expiry if that is sooner. Never for a payment
// whose provider id is unknown or that has an operation in flight (its intent's answer, webhook
// or giving up moves it), nor once it has settled (captured money changes only when the gateway
// asks).
func (s *Service) checkAfter(p *payment.Payment, now time.Time) time.Time {
	if p.ProviderPaymentID() == "" {
		return time.Time{}
	}
	switch p.Status() {
	case payment.Authorized:
		return now.Add(AuthorizationCheckAfter)
	case payment.Requested, payment.Pending, payment.RefundPending:
		at := now.Add(s.cfg.ReconcileAfter)
		if p.Status() == payment.Pending && !p.ExpiresAt().IsZero() && p.ExpiresAt().Before(at) {
			at = p.ExpiresAt()
		}
		return at
	}
	return time.Time{}
}

// apply moves p to what the provider says it is (an answer, a webhook, a lookup: via says which)
// unless that is late (p has reached or passed that stage: a duplicate, or an older callback
// arriving last) or impossible from p's state (logged: the provider and the gateway disagree).
// It reports whether p changed; what it decided goes to rep.
func (s *Service) apply(rep *report, p *payment.Payment, providerName string, o provider.Outcome, via string) bool {
	switch {
	case o.Status == "":
		return false // the event moves no payment
	case o.Status == payment.Requested:
		// The customer must act first; keep the provider's id, so the sweep can ask about it.
		return p.Status() == payment.Requested && p.ProviderPaymentID() == "" && o.ProviderPaymentID != "" &&
			p.AwaitCustomer(o.ProviderPaymentID) == nil
	}
	if p.Late(o.Status) {
		switch {
		case p.Status() == o.Status:
		case holdsNoMoney(p.Status()) && holdsMoney(o.Status):
			// Not late: the gateway gave the payment up (or it lapsed) while the provider holds
			// the money. Nothing is applied; the conflict is counted for an operator to void.
			rep.note(fmt.Sprintf("CONFLICT: payment %s is %s but the provider says %s (%s): the money is held, void or refund it", p.ID(), p.Status(), o.Status, via))
			rep.count(s.cfg.Metrics.conflicts, providerName, via)
		default:
			rep.note(fmt.Sprintf("late %s ignored: payment %s is %s, the provider says %s", via, p.ID(), p.Status(), o.Status))
			rep.count(s.cfg.Metrics.late, providerName, via)
		}
		return false
	}
	if p.Status().InFlight() && !p.Status().CanTransitionTo(o.Status) {
		// Another stage while an operation is with the provider (an authorization lapsing under
		// a capture or a void, say): that operation's answer, or its intent giving up, decides.
		rep.note(fmt.Sprintf("%s left to the intent: payment %s is %s, the provider says %s", via, p.ID(), p.Status(), o.Status))
		return false
	}
	var err error
	switch o.Status {
	case payment.Authorized:
		err = p.Authorize(o.ProviderPaymentID)
	case payment.Pending:
		err = s.pend(p, o)
	case payment.Failed:
		err = p.Fail(reasonOr(o.Reason, payment.ReasonDeclined))
	case payment.Expired:
		err = p.Expire()
	case payment.Captured:
		err = p.Capture()
	case payment.CaptureFailed:
		err = p.FailCapture(reasonOr(o.Reason, payment.ReasonDeclined))
	case payment.Voided:
		err = p.Void()
	case payment.VoidFailed:
		err = p.FailVoid(reasonOr(o.Reason, payment.ReasonDeclined))
	case payment.RefundPending:
		err = p.PendRefund()
		if err == nil {
			rep.note(fmt.Sprintf("payment %s: %s accepted the refund and pays it out later (%s): the money is not back yet", p.ID(), providerName, via))
		}
	case payment.Refunded:
		err = p.Refund()
	case payment.RefundFailed:
		err = p.FailRefund(reasonOr(o.Reason, payment.ReasonDeclined))
	default:
		err = fmt.Errorf("%w: the provider's outcome %s is not one the gateway applies", payment.ErrInvalid, o.Status)
	}
	if err != nil {
		rep.note(fmt.Sprintf("%s not applied: payment %s is %s, the provider says %s: %v", via, p.ID(), p.Status(), o.Status, err))
		rep.count(s.cfg.Metrics.conflicts, providerName, via)
		return false
	}
	rep.count(s.cfg.Metrics.transitions, providerName, string(p.Status()))
	return true
}

// holdsNoMoney: the payment ended without money being held (refused, lapsed, released). Not
// REFUNDED: Stripe's PaymentIntent stays succeeded (CAPTURED) after its refund, which is no
// conflict.
func holdsNoMoney(st payment.Status) bool {
	return st == payment.Failed || st == payment.Expired || st == payment.Voided
}

// holdsMoney: the provider holds or has taken the money.
func holdsMoney(st payment.Status) bool { return st == payment.Authorized || st == payment.Captured }

func (s *Service) pend(p *payment.Payment, o provider.Outcome) error {
	if o.Slip == nil {
		return fmt.Errorf("%w: a pending outcome without a slip", payment.ErrInvalid)
	}
	slip, err := json.Marshal(o.Slip)
	if err != nil {
		return err
	}
	return p.Pend(o.ProviderPaymentID, o.Slip.ExpiresAt, slip)
}

func reasonOr(r, def payment.Reason) payment.Reason {
	if r == "" {
		return def
	}
	return r
}

// WebhookResult is what HandleWebhook did.
type WebhookResult string

const (
	WebhookApplied   WebhookResult = "applied"   // the payment moved
	WebhookDuplicate WebhookResult = "duplicate" // the provider's event id was seen before
	WebhookIgnored   WebhookResult = "ignored"   // it moves nothing (late, unrelated, unknown payment)
)

// HandleWebhook verifies and applies one provider callback: in one transaction the provider's
// event id is recorded (a duplicate stops here), the payment moves and its event is appended.
// A callback that does not verify is provider.ErrSignature and changes nothing; one that moves
// no payment is acknowledged without a transaction.
func (s *Service) HandleWebhook(ctx context.Context, providerName string, h map[string][]string, body []byte) (WebhookResult, error) {
	g, ok := s.providers[providerName]
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownProvider, providerName)
	}
	n, err := g.ParseWebhook(h, body, s.cfg.Now())
	if err != nil {
		if errors.Is(err, provider.ErrSignature) {
			s.cfg.Metrics.webhookRejected.WithLabelValues(providerName, "signature").Inc()
		} else {
			s.cfg.Metrics.webhookRejected.WithLabelValues(providerName, "malformed").Inc()
		}
		return "", err
	}
	if n.Outcome.Status == "" {
		// It moves no payment (Stripe's charge.* and payment_intent.created, KOMOJU's ping):
		// nothing to de-duplicate or apply, so no transaction. Several come with every payment.
		s.cfg.Metrics.webhooks.WithLabelValues(providerName, string(WebhookIgnored)).Inc()
		return WebhookIgnored, nil
	}
	var (
		result          WebhookResult
		paymentID, next string
		rep             *report
	)
	err = s.cfg.Repo.Update(ctx, func(ctx context.Context, tx Tx) error {
		result, paymentID, next, rep = WebhookIgnored, "", "", &report{}
		p, err := s.webhookPayment(ctx, tx, providerName, n)
		if err != nil {
			return err
		}
		if p != nil {
			paymentID = p.ID()
		}
		fresh, err := tx.RecordProviderEvent(ctx, ProviderEvent{
			Provider: providerName, EventID: n.EventID, EventType: n.EventType, PaymentID: paymentID, Payload: body,
		})
		if err != nil || !fresh {
			result = WebhookDuplicate
			return err
		}
		if p == nil {
			rep.note(fmt.Sprintf("%s event %s (%s) names no payment the gateway knows", providerName, n.EventID, n.EventType))
			return nil
		}
		if !s.apply(rep, p, providerName, n.Outcome, "webhook") {
			return nil
		}
		result = WebhookApplied
		if next, err = s.followUp(ctx, tx, p); err != nil {
			return err
		}
		return tx.Save(ctx, p, false, s.checkAfter(p, s.cfg.Now()))
	})
	if err != nil {
		return "", fmt.Errorf("%s webhook %s: %w", providerName, n.EventID, err)
	}
	rep.publish(ctx)
	s.cfg.Metrics.webhooks.WithLabelValues(providerName, string(result)).Inc()
	if result == WebhookApplied && s.cfg.Nudger != nil {
		s.cfg.Nudger.NudgeAggregate(ctx, paymentID)
	}
	s.resumeFollowUp(ctx, next)
	return result, nil
}

// resumeFollowUp carries out, after the commit, the intent a webhook or a lookup recorded (key;
// "" for none). It is not the caller's error when it stays unfinished: the sweep resumes it.
func (s *Service) resumeFollowUp(ctx context.Context, key string) {
	if key == "" {
		return
	}
	if err := s.Resume(ctx, key); err != nil {
		note(ctx, fmt.Sprintf("%s left to the sweep: %v", key, err))
	}
}

// webhookPayment finds the payment a notification is about: by the id the gateway sent as
// metadata (a key read), else by the provider's id (an index read); nil if neither is known.
func (s *Service) webhookPayment(ctx context.Context, tx Tx, providerName string, n provider.Notification) (*payment.Payment, error) {
	if n.PaymentID != "" {
		p, err := tx.Payment(ctx, n.PaymentID)
		if !errors.Is(err, payment.ErrNotFound) {
			return p, err
		}
	}
	if n.ProviderPaymentID != "" {
		p, err := tx.PaymentByProviderID(ctx, providerName, n.ProviderPaymentID)
		if !errors.Is(err, payment.ErrNotFound) {
			return p, err
		}
	}
	return nil, nil
}

// SweepReport is what one sweep did.
type SweepReport struct {
	Resumed int // STARTED intents carried out
	Checked int // payments the provider was asked about
	Changed int // of those, payments that moved
	// RefundsPending counts the payments asked about whose refund the provider had accepted and
	// still not paid out (REFUND_PENDING, asked about again after ReconcileAfter).
	RefundsPending int
	Failures       []string // what could not be done (retried by the next sweep)
}

// SweepLimit is the most intents and payments one sweep handles (each); the next sweep takes the rest.
const SweepLimit = 200

// Sweep resumes intents the request path left unfinished (authorizations, captures, voids,
// refunds) and asks the providers about payments that have waited for a callback longer than
// ReconcileAfter (3-D Secure, slips, refunds accepted and not paid out), applying what they say
// (a missed webhook is not a stuck order). Run it on a schedule (Cloud Scheduler → POST
// /admin/sweep).
func (s *Service) Sweep(ctx context.Context) (SweepReport, error) {
	rep := SweepReport{Failures: []string{}}
	now := s.cfg.Now()
	intents, err := s.cfg.Repo.IntentsToResume(ctx, now, SweepLimit)
	if err != nil {
		return rep, err
	}
	for _, in := range intents {
		if err := s.Resume(ctx, in.Key); err != nil {
			rep.Failures = append(rep.Failures, err.Error())
			continue
		}
		rep.Resumed++
	}
	due, err := s.cfg.Repo.PaymentsToCheck(ctx, now, SweepLimit)
	if err != nil {
		return rep, err
	}
	for _, p := range due {
		changed, status, err := s.reconcile(ctx, p)
		if err != nil {
			rep.Failures = append(rep.Failures, err.Error())
			continue
		}
		rep.Checked++
		if changed {
			rep.Changed++
		}
		if status == payment.RefundPending {
			rep.RefundsPending++
		}
	}
	return rep, nil
}

// reconcile asks p's provider what p is and applies the answer; it reports whether p changed
// and the status p is left in.
func (s *Service) reconcile(ctx context.Context, p *payment.Payment) (bool, payment.Status, error) {
	g, ok := s.providers[p.Method().Provider()]
	if !ok {
		return false, "", fmt.Errorf("payment %s: %w: %s", p.ID(), ErrUnknownProvider, p.Method().Provider())
	}
	o, err := g.lookup(ctx, p.ProviderPaymentID())
	if err != nil {
		return false, "", fmt.Errorf("payment %s: ask %s: %w", p.ID(), g.Name(), err)
	}
	changed, next, status := false, "", payment.Status("")
	var rep *report
	err = s.cfg.Repo.Update(ctx, func(ctx context.Context, tx Tx) error {
		changed, next, rep = false, "", &report{}
		p, err := tx.Payment(ctx, p.ID())
		if err != nil {
			return err
		}
		if changed = s.apply(rep, p, g.Name(), o, "reconciliation"); changed {
			if next, err = s.followUp(ctx, tx, p); err != nil {
				return err
			}
		} else if p.Status() == payment.RefundPending && o.Status == payment.RefundPending {
			rep.note(fmt.Sprintf("payment %s: %s has still not paid out its refund; asking again in %s", p.ID(), g.Name(), s.cfg.ReconcileAfter))
		}
		status = p.Status()
		return tx.Save(ctx, p, false, s.checkAfter(p, s.cfg.Now()))
	})
	if err != nil {
		return false, "", err
	}
	rep.publish(ctx)
	if changed {
		s.cfg.Metrics.reconciled.WithLabelValues(g.Name()).Inc()
		if s.cfg.Nudger != nil {
			s.cfg.Nudger.NudgeAggregate(ctx, p.ID())
		}
	}
	s.resumeFollowUp(ctx, next)
	return changed, status, nil
}

// Payment returns a payment.
func (s *Service) Payment(ctx context.Context, id string) (*payment.Payment, error) {
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return nil, fmt.Errorf("%w: payment id %q is not a UUID", payment.ErrInvalid, id)
	}
	return s.cfg.Repo.Payment(ctx, id)
}

// PaymentsOfOrder returns an order's payments.
func (s *Service) PaymentsOfOrder(ctx context.Context, orderID string) ([]*payment.Payment, error) {
	if _, err := uuid.Parse(orderID); err != nil || len(orderID) != 36 {
		return nil, fmt.Errorf("%w: order id %q is not a UUID", payment.ErrInvalid, orderID)
	}
	return s.cfg.Repo.PaymentsOfOrder(ctx, orderID)
}

// noteKey carries where a use case's notes (what it decided: a late callback ignored, a
// conflict) go: the webhook handler's log line, or outboxlib.Note after a delivery. Without
// WithNotes they are dropped.
type noteKey struct{}

// WithNotes returns ctx whose use-case notes go to f.
func WithNotes(ctx context.Context, f func(context.Context, string)) context.Context {
	return context.WithValue(ctx, noteKey{}, f)
}

// report is what a use case decided inside a transaction function: notes and counter increments,
// published once the transaction has committed. The client may run the function more than once (an
// aborted attempt is retried), and only the attempt that committed happened.
type report struct {
	notes []string
	incs  []increment
}

type increment struct {
	c      *prometheus.CounterVec
	labels []string
}

func (r *report) note(msg string) { r.notes = append(r.notes, msg) }

func (r *report) count(c *prometheus.CounterVec, labels ...string) {
	r.incs = append(r.incs, increment{c, labels})
}

// publish sends the notes to the caller's notes (WithNotes) and makes the increments.
func (r *report) publish(ctx context.Context) {
	for _, n := range r.notes {
		note(ctx, n)
	}
	for _, i := range r.incs {
		i.c.WithLabelValues(i.labels...).Inc()
	}
}

func note(ctx context.Context, msg string) {
	if f, ok := ctx.Value(noteKey{}).(func(context.Context, string)); ok {
		f(ctx, msg)
	}
}
