// Package paysim is a local sandbox of the payment providers, in-process or standalone. One
// listener speaks two dialects:
//
//   - Stripe's REST API under /v1/ (form-encoded requests, JSON responses, Stripe's error
//     objects) for PaymentIntents, refunds and events, so that the official client
//     github.com/stripe/stripe-go/v82 works against it unchanged once its backend URL points at
//     URL(); events are delivered to Options.WebhookURL signed exactly as Stripe signs them, so
//     receivers verify them with webhook.ConstructEvent.
//   - KOMOJU's REST API under /api/v1/ (JSON, HTTP Basic with the secret key, KOMOJU's error
//     objects) for konbini, bank transfer and PayPay payments; events are delivered to
//     Options.KomojuWebhookURL signed with X-Komoju-Signature.
//
// Unlike a mock it keeps state and enforces the providers' rules: status transitions, test
// payment methods that decline or ask for 3-D Secure, PayPay wallets with balances, slips that
// expire, idempotency keys, and authorizations that lapse, all on one virtual clock. Endpoints
// under /_sandbox/ control what a real provider does not let a test control: the clock, webhook
// faults (duplicates, drops, delays, reordering), API faults (500s, answers held back past a
// client's timeout), paying a slip, and a read-back of every object for reconciliation.
//
// State lives in memory unless Options.DataDir is set: then Start loads DataDir/paysim.json and
// every change is written there (atomically, before the request that made it is answered), so
// a restarted sandbox still knows the payments an application's database refers to, its
// idempotency keys and its virtual clock, and delivers the webhooks it had not delivered yet.
// See README.md for what differs from the real providers.
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
	// WebhookEvents are the event types the Stripe endpoint is subscribed to, as Stripe's
	// enabled_events: exact types or wildcards such as "payment_intent.*"; empty means every type
	// ("*"). An event of another type is still created and readable through the API; it is only
	// not delivered.
	WebhookEvents []string
	// WebhookRetry controls redelivery after a non-2xx answer or a connection error.
	WebhookRetry RetryPolicy
	// ClockStart is the virtual time when the server starts; default the wall-clock time.
	// The virtual clock then runs with the wall clock, plus whatever AdvanceClock adds.
	ClockStart time.Time
	// APIVersion is written in events; default DefaultAPIVersion.
	APIVersion string

	// KomojuSecretKey, if set, is the only KOMOJU secret key accepted; otherwise any
	// sk_test_... key is.
	KomojuSecretKey string
	// KomojuWebhookURL receives every KOMOJU event as KOMOJU's webhook POST; empty means they
	// are only retrievable through the API.
	KomojuWebhookURL string
	// KomojuWebhookSecret signs KOMOJU deliveries (X-Komoju-Signature); default
	// "komoju_whsec_paysim".
	KomojuWebhookSecret string
	// WalletBalances seeds the PayPay wallets: customer id (metadata.customer_id of a payment)
	// to balance in minor units. nil is DefaultWalletBalances(); a customer without a wallet
	// has balance 0.
	WalletBalances map[string]int64
	// KomojuRefundPayout is how long, in virtual time, KOMOJU takes to pay out a konbini or bank
	// transfer payment's refund request (by bank transfer to the customer): until then the
	// refund is pending and the payment captured. Zero is DefaultKomojuRefundPayout. The
	// sandbox's PayOutKomojuRefund and RejectKomojuRefund settle a request at once.
	KomojuRefundPayout time.Duration

	// DataDir, if set, keeps the sandbox's state across restarts in DataDir/paysim.json
	// (created if missing): loaded by Start, rewritten before every change is acknowledged.
	// A loaded state keeps its own clock and wallets: ClockStart and WalletBalances then only
	// seed a sandbox whose file does not exist yet.
	DataDir string

	// Logf, if set, receives one line per request and per webhook attempt.
	Logf func(format string, args ...any)
}

// DefaultWalletBalances are the PayPay wallets of a sandbox started without
// Options.WalletBalances: ali can pay, sara cannot pay much.
func DefaultWalletBalances() map[string]int64 { return map[string]int64{"ali": 50000, "sara": 2000} }

// Server is a running sandbox.
type Server struct {
	opts        Options
	lis         net.Listener
	httpSrv     *http.Server
	webhooks    *webhooks
	stripeHooks *webhookTarget
	komojuHooks *webhookTarget
	faults      apiFaults
	closing     chan struct{} // closed by Close: held responses are released

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
	komoju  komojuState
	due     dueQueue  // what the virtual clock will make due (due.go)
	fresh   []message // events created by the current request, delivered after it unlocks
	// undelivered are the events (of both dialects) with a webhook URL whose delivery has not
	// ended (delivered, failed or dropped); a restart with a DataDir delivers them again.
	undelivered map[string]bool
	dataPath    string // DataDir/paysim.json; "" keeps everything in memory
	dirty       bool   // state changed since the last write of dataPath
	saveBuf     []byte // the last snapshot written, its capacity reused by the next
	closed      bool   // Close wrote the last state: later changes cannot be saved

	closeOnce sync.Once
	closeErr  error
}

// Start starts the sandbox and returns once it accepts connections. ctx only bounds start-up.
// With Options.DataDir it first loads the state saved there; a file that cannot be read, is not
// a snapshot or is of another format version is an error naming the file (never a fresh start).
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.WebhookSecret == "" {
		opts.WebhookSecret = "whsec_paysim"
	}
	if opts.KomojuWebhookSecret == "" {
		opts.KomojuWebhookSecret = "komoju_whsec_paysim"
	}
	if opts.WalletBalances == nil {
		opts.WalletBalances = DefaultWalletBalances()
	}
	if opts.KomojuRefundPayout <= 0 {
		opts.KomojuRefundPayout = DefaultKomojuRefundPayout
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
		opts:        opts,
		startWall:   now,
		intents:     map[string]*paymentIntent{},
		pms:         map[string]*paymentMethod{},
		charges:     map[string]*charge{},
		refunds:     map[string]*refund{},
		byEvent:     map[string]*event{},
		idem:        map[idemKey]*idemRecord{},
		komoju:      newKomojuState(opts.WalletBalances),
		undelivered: map[string]bool{},
		closing:     make(chan struct{}),
		faults:      apiFaults{fault: APIFault{Mode: FaultNone}},
		stripeHooks: stripeTarget(opts.WebhookURL, opts.WebhookSecret),
		komojuHooks: komojuTarget(opts.KomojuWebhookURL, opts.KomojuWebhookSecret),
	}
	if !opts.ClockStart.IsZero() {
		s.offset = opts.ClockStart.Sub(now)
	}
	var requeued []message
	if opts.DataDir != "" {
		var err error
		if requeued, err = s.openDataDir(opts.DataDir); err != nil {
			return nil, fmt.Errorf("paysim: %w", err)
		}
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	if err != nil {
		return nil, fmt.Errorf("paysim: listen: %w", err)
	}
	s.lis = lis
	s.webhooks = newWebhooks(opts.WebhookRetry, opts.Logf, s.deliveryEnded)
	s.httpSrv = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.httpSrv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opts.Logf("paysim: serve: %v", err)
		}
	}()
	s.webhooks.send(requeued)
	return s, nil
}

// Addr is the host:port the sandbox listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// URL is the base URL of both dialects (no trailing slash): stripe-go's API backend URL, and
// the KOMOJU client's base URL (its paths start with /api/v1/).
func (s *Server) URL() string { return "http://" + s.Addr() }

// WebhookSecret is the secret that signs Stripe webhook deliveries.
func (s *Server) WebhookSecret() string { return s.opts.WebhookSecret }

// KomojuWebhookSecret is the secret that signs KOMOJU webhook deliveries.
func (s *Server) KomojuWebhookSecret() string { return s.opts.KomojuWebhookSecret }

// Close stops serving, releases responses held by a timeout fault, cancels webhook deliveries
// in flight and waits for them to end. With a DataDir it then writes the state a last time
// (with the deliveries that ended since the last write; those it cut short stay undelivered).
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.closeErr = s.httpSrv.Shutdown(ctx)
		s.webhooks.close()
		s.mu.Lock()
		if err := s.saveLocked(); err != nil && s.closeErr == nil {
			s.closeErr = fmt.Errorf("paysim: %w", err)
		}
		s.closed = true
		s.mu.Unlock()
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
// older than 7 days lapse, KOMOJU slips past their deadline expire, idempotency keys older than
// 24 hours are forgotten. It returns the new virtual time.
func (s *Server) AdvanceClock(d time.Duration) (time.Time, error) {
	if d < 0 {
		return time.Time{}, fmt.Errorf("advance clock by %v: the clock only moves forward", d)
	}
	s.mu.Lock()
	s.offset += d
	s.dirty = true
	s.tickLocked()
	now := s.nowLocked()
	err := s.saveLocked()
	msgs := s.takeFreshLocked()
	s.mu.Unlock()
	s.webhooks.send(msgs)
	if err != nil {
		return time.Time{}, fmt.Errorf("advance clock by %v: %w", d, err)
	}
	return now, nil
}

// takeFreshLocked hands over the events created since the last call, for delivery once the
// lock is released (deliveries never run under s.mu).
func (s *Server) takeFreshLocked() []message {
	msgs := s.fresh
	s.fresh = nil
	return msgs
}

const alphanumerics = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns a Stripe-looking object id: the prefix, an underscore and 24 random letters
// and digits.
func newID(prefix string) string { return prefix + "_" + randomString(alphanumerics, 24) }

// randomString returns n random characters of alphabet.
func randomString(alphabet string, n int) string {
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
