// Package paysim is a local sandbox of a payment provider, in-process or standalone. It speaks
// the Stripe REST API (form-encoded requests, JSON responses, Stripe's error objects) for
// PaymentIntents, refunds and events, so that the official client
// github.com/stripe/stripe-go/v82 works against it unchanged once its backend URL points at
// URL(). Every state change creates an Event, which is delivered to Options.WebhookURL signed
// exactly as Stripe signs webhooks, so receivers verify it with webhook.ConstructEvent.
//
// Unlike a mock it keeps state and enforces Stripe's rules: status transitions, test payment
// methods that decline or ask for 3-D Secure, idempotency keys, and authorizations that lapse
// after 7 days of a virtual clock. Endpoints under /_sandbox/ control what a real provider does
// not let a test control: the clock, webhook faults (duplicates, drops, delays, reordering),
// and a read-back of every object for reconciliation. See README.md for what differs from
// Stripe.
package paysim

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// DefaultAPIVersion is the Stripe API version written in events and answered in the
// Stripe-Version header: the one stripe-go v82 pins, so webhook.ConstructEvent accepts events.
const DefaultAPIVersion = "2025-08-27.basil"

// Options configures Start. Zero fields take the defaults documented on each.
type Options struct {
	Host string // default 127.0.0.1
	Port int    // 0 picks a free port
	// APIKey, if set, is the only secret key accepted; otherwise any sk_test_... key is.
	APIKey string
	// WebhookURL receives every Event as Stripe's webhook POST; empty means events are only
	// retrievable through the API.
	WebhookURL string
	// WebhookSecret signs deliveries (Stripe-Signature); default "whsec_paysim".
	WebhookSecret string
	// WebhookRetry controls redelivery after a non-2xx answer or a connection error.
	WebhookRetry RetryPolicy
	// ClockStart is the virtual time when the server starts; default the wall-clock time.
	// The virtual clock then runs with the wall clock, plus whatever AdvanceClock adds.
	ClockStart time.Time
	// APIVersion is written in events; default DefaultAPIVersion.
	APIVersion string
	// Logf, if set, receives one line per request and per webhook attempt.
	Logf func(format string, args ...any)
}

// Server is a running sandbox.
type Server struct {
	opts     Options
	lis      net.Listener
	httpSrv  *http.Server
	webhooks *webhooks

	startWall time.Time

	mu      sync.Mutex // guards everything below; every API request runs under it
	offset  time.Duration
	cur     requestInfo // the API request being served, for the events it creates
	intents map[string]*paymentIntent
	pms     map[string]*paymentMethod
	order   []string // payment intent ids in creation order
	charges map[string]*charge
	refunds map[string]*refund
	rorder  []string // refund ids in creation order
	events  []*event
	byEvent map[string]*event
	idem    map[idemKey]*idemRecord
	fresh   []*event // events created by the current request, delivered after it unlocks

	closeOnce sync.Once
	closeErr  error
}

// Start starts the sandbox and returns once it accepts connections. ctx only bounds start-up.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.WebhookSecret == "" {
		opts.WebhookSecret = "whsec_paysim"
	}
	if opts.APIVersion == "" {
		opts.APIVersion = DefaultAPIVersion
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	opts.WebhookRetry = opts.WebhookRetry.withDefaults()
	now := time.Now()
	s := &Server{
		opts:      opts,
		startWall: now,
		intents:   map[string]*paymentIntent{},
		pms:       map[string]*paymentMethod{},
		charges:   map[string]*charge{},
		refunds:   map[string]*refund{},
		byEvent:   map[string]*event{},
		idem:      map[idemKey]*idemRecord{},
	}
	if !opts.ClockStart.IsZero() {
		s.offset = opts.ClockStart.Sub(now)
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	if err != nil {
		return nil, fmt.Errorf("paysim: listen: %w", err)
	}
	s.lis = lis
	s.webhooks = newWebhooks(opts.WebhookURL, opts.WebhookSecret, opts.WebhookRetry, opts.Logf)
	s.httpSrv = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.httpSrv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opts.Logf("paysim: serve: %v", err)
		}
	}()
	return s, nil
}

// Addr is the host:port the sandbox listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// URL is the base URL to give stripe-go as its API backend URL (no trailing slash).
func (s *Server) URL() string { return "http://" + s.Addr() }

// WebhookSecret is the secret that signs webhook deliveries.
func (s *Server) WebhookSecret() string { return s.opts.WebhookSecret }

// Close stops serving, cancels webhook deliveries in flight and waits for them to end.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.closeErr = s.httpSrv.Shutdown(ctx)
		s.webhooks.close()
	})
	return s.closeErr
}

// Now is the virtual time.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nowLocked()
}

func (s *Server) nowLocked() time.Time { return time.Now().Add(s.offset) }

// AdvanceClock moves the virtual clock forward by d and applies what falls due: authorizations
// older than 7 days lapse, idempotency keys older than 24 hours are forgotten. It returns the
// new virtual time.
func (s *Server) AdvanceClock(d time.Duration) (time.Time, error) {
	if d < 0 {
		return time.Time{}, fmt.Errorf("advance clock by %v: the clock only moves forward", d)
	}
	s.mu.Lock()
	s.offset += d
	s.tickLocked()
	now := s.nowLocked()
	evs := s.takeFreshLocked()
	s.mu.Unlock()
	s.webhooks.send(evs, s.opts.APIVersion)
	return now, nil
}

// tickLocked applies everything the virtual clock has made due.
func (s *Server) tickLocked() {
	now := s.nowLocked()
	for _, id := range s.order {
		pi := s.intents[id]
		if pi.status == statusRequiresCapture && !now.Before(pi.authorizedAt.Add(authorizationValidity)) {
			pi.expire(pi.authorizedAt.Add(authorizationValidity))
			s.emitLocked("payment_intent.canceled", pi.json())
		}
	}
	for k, rec := range s.idem {
		if now.Sub(rec.created) >= idempotencyKeyLifetime {
			delete(s.idem, k)
		}
	}
}

// takeFreshLocked hands over the events created since the last call, for delivery once the
// lock is released (deliveries never run under s.mu).
func (s *Server) takeFreshLocked() []*event {
	evs := s.fresh
	s.fresh = nil
	return evs
}

const alphanumerics = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns a Stripe-looking object id: the prefix, an underscore and 24 random letters
// and digits.
func newID(prefix string) string {
	b := make([]byte, 24)
	rand.Read(b)
	for i := range b {
		b[i] = alphanumerics[int(b[i])%len(alphanumerics)]
	}
	return prefix + "_" + string(b)
}
