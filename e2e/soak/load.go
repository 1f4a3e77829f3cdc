package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/internal/localenv"
)

// The catalog of a soak (StackOptions seeds it): plenty of everything, except LIMITED, which no
// order of 100 can get (out of stock), and VASE, which the simulated carrier refuses to ship
// (CARRIER_SIMULATE_FAIL_SKUS). Every price is in yen: wallets and slips take yen only.
var catalog = []harness.Product{
	{SKU: "MUG", Name: "Anchor mug", PriceMinor: 1200, OnHand: 1_000_000},
	{SKU: "TEA", Name: "Sencha 100 g", PriceMinor: 800, OnHand: 1_000_000},
	{SKU: "BOWL", Name: "Rice bowl", PriceMinor: 2500, OnHand: 1_000_000},
	{SKU: "SPOON", Name: "Lacquer spoon", PriceMinor: 300, OnHand: 1_000_000},
	{SKU: "VASE", Name: "Glass vase", PriceMinor: 4000, OnHand: 1_000_000},
	{SKU: "LIMITED", Name: "Limited print", PriceMinor: 9000, OnHand: 50},
}

// everyday are the SKUs an ordinary order takes one or two of.
var everyday = []string{"MUG", "TEA", "BOWL", "SPOON"}

// The PayPay wallets of a soak (StackOptions gives them to the sandbox): the rich customer pays
// every wallet order; sara's ¥2,000 never covers the ¥2,400 she orders.
const (
	richWallet    = "soak-wallet"
	richBalance   = int64(1_000_000_000)
	poorWallet    = "sara"
	poorBalance   = int64(2000)
	expiredReason = "CANCELLED payment_expired"
)

// Line is one line of an order.
type Line struct {
	SKU      string
	Quantity int64
}

// Order is one order the load placed, with what its customer did and what it must end as.
type Order struct {
	N        int
	Scenario string
	Customer string
	Key      string // the Idempotency-Key of the POST (the cancel uses Key + "-cancel")
	Method   string // card, wallet, konbini, bank_transfer
	Lines    []Line
	ID       string // "" if the order was never placed
	// Shed is a placement the orders service refused as overloaded until its customer gave up
	// (errShed): no order may exist for its Key, unless Unsure: an earlier attempt went
	// unanswered and may have made it.
	Shed, Unsure bool
	Placed       time.Time
	// Expect lists the final states ("COMPLETED", "CANCELLED payment_declined") the order may end
	// in, given what its customer did and saw; the checker compares.
	Expect []string
	// Notes say what the journey did ("cancel at CONFIRMED: 202").
	Notes []string
	// Final is the state it ended in (the orders database, read by the checker).
	Final string
	// Problem is what went wrong on the customer's side (a placement that never got an answer,
	// an answer the API must not give); it fails the order's check.
	Problem string

	mu sync.Mutex
	// reads are when each of the customer's reads of the order (waitFor) got its answer.
	reads []time.Time
}

func (o *Order) note(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Notes = append(o.Notes, fmt.Sprintf(format, args...))
}

func (o *Order) problem(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.Problem == "" {
		o.Problem = fmt.Sprintf(format, args...)
	}
}

func (o *Order) expect(states ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Expect = states
}

// scenario is one kind of customer: how it orders, pays and behaves, and how its order must end.
type scenario struct {
	name   string
	weight int // orders of this kind in every deck of 100
	method string
	// payment is the request's payment object.
	payment map[string]any
	// customer names the customer of the n-th order ("" = a customer of its own).
	customer string
	// lines are the order's lines (nil = one or two everyday SKUs).
	lines []Line
	// expect is the order's final state when nothing the customer saw changes it.
	expect []string
	// act is what the customer does once the order is placed (nil = nothing).
	act func(l *load, ctx context.Context, o *Order)
}

func card(pm string) map[string]any { return map[string]any{"method": "card", "payment_method": pm} }

// raced is the other end a cancel of a confirmed order may see: the carrier shipped meanwhile, so
// the stock cannot be released (documented: an operator settles it; the money is voided).
const raced = "NEEDS_ATTENTION stock_release_failed_already_shipped"

// scenarios is the mix. Weights add up to 100: each deck of 100 orders has exactly this many of
// each, in a seeded order, so even a short soak tries every kind.
var scenarios = []scenario{
	{name: "card", weight: 24, method: "card", payment: card("pm_card_visa"), expect: []string{"COMPLETED"}},
	{name: "card declined", weight: 4, method: "card", payment: card("pm_card_chargeDeclined"), expect: []string{"CANCELLED payment_declined"}},
	{name: "card insufficient funds", weight: 3, method: "card", payment: card("pm_card_chargeDeclinedInsufficientFunds"), expect: []string{"CANCELLED payment_insufficient_funds"}},
	{name: "card 3-D Secure", weight: 4, method: "card", payment: card("pm_card_threeDSecure2Required"), expect: []string{"COMPLETED"}, act: (*load).complete3DS},
	{name: "wallet", weight: 12, method: "wallet", payment: map[string]any{"method": "wallet"}, customer: richWallet, expect: []string{"COMPLETED"}},
	{name: "wallet insufficient funds", weight: 3, method: "wallet", payment: map[string]any{"method": "wallet"}, customer: poorWallet,
		lines: []Line{{"MUG", 2}}, expect: []string{"CANCELLED payment_insufficient_funds"}},
	{name: "konbini paid", weight: 10, method: "konbini", payment: map[string]any{"method": "konbini", "store": "lawson"}, expect: []string{"COMPLETED"}, act: (*load).paySlip},
	{name: "konbini expired", weight: 5, method: "konbini", payment: map[string]any{"method": "konbini", "store": "family-mart"}, expect: []string{expiredReason}},
	{name: "bank transfer paid", weight: 6, method: "bank_transfer", payment: map[string]any{"method": "bank_transfer"}, expect: []string{"COMPLETED"}, act: (*load).paySlip},
	{name: "bank transfer expired", weight: 3, method: "bank_transfer", payment: map[string]any{"method": "bank_transfer"}, expect: []string{expiredReason}},
	{name: "cancel at once", weight: 4, method: "card", payment: card("pm_card_visa"), expect: []string{"CANCELLED customer_request"}, act: (*load).cancelAtOnce},
	{name: "cancel confirmed", weight: 6, method: "card", payment: card("pm_card_visa"), expect: []string{"CANCELLED customer_request"}, act: (*load).cancelConfirmed},
	{name: "cancel unpaid slip", weight: 3, method: "konbini", payment: map[string]any{"method": "konbini", "store": "ministop"}, expect: []string{"CANCELLED customer_request"}, act: (*load).cancelUnpaidSlip},
	{name: "cancel paid slip", weight: 3, method: "konbini", payment: map[string]any{"method": "konbini", "store": "seven-eleven"}, expect: []string{"CANCELLED customer_request"}, act: (*load).cancelPaidSlip},
	{name: "cancel after shipping", weight: 3, method: "wallet", payment: map[string]any{"method": "wallet"}, customer: richWallet, expect: []string{"COMPLETED"}, act: (*load).cancelAfterShipping},
	{name: "out of stock", weight: 3, method: "card", payment: card("pm_card_visa"), lines: []Line{{"LIMITED", 100}}, expect: []string{"CANCELLED out_of_stock"}},
	{name: "shipment fails", weight: 4, method: "card", payment: card("pm_card_visa"), lines: []Line{{"VASE", 1}}, expect: []string{"CANCELLED shipment_failed"}},
}

// load places the orders and runs their customers' journeys.
type load struct {
	s     *harness.Stack
	cfg   Config
	start time.Time
	logf  func(format string, args ...any)

	mu     sync.Mutex
	orders []*Order
	deck   []int // indexes into scenarios, the rest of the current deck
	rnd    *rand.Rand

	placed   atomic.Int64
	shed     atomic.Int64 // placements given up as refused (Order.Shed)
	journeys sync.WaitGroup

	// clockMu serializes the sandbox's clock jumps with the customers' slip payments, and
	// advances records when the clock jumped.
	clockMu  sync.RWMutex
	advances []time.Time
}

func newLoad(s *harness.Stack, cfg Config, start time.Time, logf func(string, ...any)) *load {
	return &load{s: s, cfg: cfg, start: start, logf: logf, rnd: rand.New(rand.NewPCG(cfg.Seed, 0x50a4))}
}

// run places orders at cfg.Rate until ctx is done, open loop: each order's journey runs on its own
// goroutine, so a slow answer never slows the rate down.
func (l *load) run(ctx context.Context, journeyCtx context.Context) {
	interval := time.Duration(float64(time.Second) / l.cfg.Rate)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		o, sc := l.next()
		l.journeys.Add(1)
		go func() {
			defer l.journeys.Done()
			l.journey(journeyCtx, o, sc)
		}()
	}
}

// next deals the next order from the deck (a new shuffled deck of 100 when it runs out).
func (l *load) next() (*Order, scenario) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.deck) == 0 {
		for i, sc := range scenarios {
			for range sc.weight {
				l.deck = append(l.deck, i)
			}
		}
		l.rnd.Shuffle(len(l.deck), func(i, j int) { l.deck[i], l.deck[j] = l.deck[j], l.deck[i] })
	}
	sc := scenarios[l.deck[0]]
	l.deck = l.deck[1:]
	n := len(l.orders) + 1
	o := &Order{N: n, Scenario: sc.name, Customer: sc.customer, Key: uuid.NewString(), Method: sc.method, Lines: sc.lines, Expect: sc.expect}
	if o.Customer == "" {
		o.Customer = fmt.Sprintf("soak-c%05d", n)
	}
	if o.Lines == nil {
		perm := l.rnd.Perm(len(everyday))
		for _, i := range perm[:1+l.rnd.IntN(2)] {
			o.Lines = append(o.Lines, Line{everyday[i], 1 + l.rnd.Int64N(3)})
		}
	}
	l.orders = append(l.orders, o)
	return o, sc
}

// Orders are the orders placed so far.
func (l *load) Orders() []*Order {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Order(nil), l.orders...)
}

// journey places the order and does what its customer does.
func (l *load) journey(ctx context.Context, o *Order, sc scenario) {
	lines := make([]map[string]any, 0, len(o.Lines))
	for _, ln := range o.Lines {
		lines = append(lines, map[string]any{"sku": ln.SKU, "quantity": ln.Quantity})
	}
	language := "ja"
	if o.N%3 == 0 {
		language = "en"
	}
	body := map[string]any{
		"customer_id": o.Customer, "email": o.Customer + "@example.com", "language": language,
		"lines": lines, "payment": sc.payment,
	}
	o.Placed = time.Now()
	id, err := placeOrder(ctx, l.s, o, body)
	if errors.Is(err, errShed) {
		o.mu.Lock()
		o.Shed, o.Unsure = true, errors.Is(err, errUnanswered)
		o.mu.Unlock()
		o.note("place: %v", err)
		l.shed.Add(1)
		return
	}
	if err != nil {
		o.problem("place: %v", err)
		return
	}
	o.mu.Lock()
	o.ID = id
	o.mu.Unlock()
	l.placed.Add(1)
	if sc.act != nil {
		sc.act(l, ctx, o)
	}
}

// errMovedOn is a wait that ended because the order reached a state the customer did not wait for.
var errMovedOn = errors.New("the order moved on")

// waitFor polls the order as its customer sees it (every half second, for at most cfg.ActWait)
// until cond holds. It stops early with errMovedOn once the order is terminal without cond.
func (l *load) waitFor(ctx context.Context, o *Order, what string, cond func(customerOrder) bool) (customerOrder, error) {
	deadline := time.Now().Add(l.cfg.ActWait)
	for {
		got, err := readOrder(ctx, l.s, o)
		switch {
		case err != nil && ctx.Err() != nil:
			return got, ctx.Err()
		case err != nil:
			// readOrder retried for a minute already: say so and keep trying until the deadline.
			o.note("read while waiting for %s: %v", what, err)
		case cond(got):
			return got, nil
		default:
			o.mu.Lock()
			o.reads = append(o.reads, time.Now())
			o.mu.Unlock()
			if terminal(got.Status) {
				return got, fmt.Errorf("%w: %s while waiting for %s", errMovedOn, got.state(), what)
			}
		}
		if time.Now().After(deadline) {
			return got, fmt.Errorf("not %s within %s (it is %s)", what, l.cfg.ActWait, got.state())
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func terminal(status string) bool {
	return status == "COMPLETED" || status == "CANCELLED" || status == "NEEDS_ATTENTION"
}

// movedOn settles what the customer sees when the order went another way than the one the
// customer waited for: an unpaid slip whose deadline passed while the sandbox's clock jumped is a
// payment_expired cancellation, which the customer cannot help; anything else is a problem.
func (l *load) movedOn(o *Order, got customerOrder, err error) {
	if errors.Is(err, errMovedOn) && strings.HasSuffix(got.state(), "payment_expired") && l.clockJumpedSince(o.Placed) {
		o.expect(expiredReason)
		o.note("the slip expired before it was paid (the sandbox's clock jumped)")
		return
	}
	o.problem("%v", err)
}

func (l *load) clockJumpedSince(t time.Time) bool {
	l.clockMu.RLock()
	defer l.clockMu.RUnlock()
	return len(l.advances) > 0 && l.advances[len(l.advances)-1].After(t)
}

// hasSlip is the slip's instructions shown on an order awaiting payment.
func hasSlip(got customerOrder) bool {
	return got.Status == "AWAITING_PAYMENT" && got.Payment.Instructions != nil
}

// paySlip waits for the slip, then the customer pays it at the store (the sandbox).
func (l *load) paySlip(ctx context.Context, o *Order) {
	got, err := l.waitFor(ctx, o, "the slip", hasSlip)
	if err != nil {
		l.movedOn(o, got, err)
		return
	}
	providerID, err := l.providerPaymentID(ctx, o.ID)
	if err != nil {
		o.problem("the slip's KOMOJU payment: %v", err)
		return
	}
	l.clockMu.RLock()
	err = l.s.Paysim.PayKomojuSlip(providerID)
	l.clockMu.RUnlock()
	if err == nil {
		o.note("paid the slip %s", providerID)
		return
	}
	if st, serr := l.slipStatus(ctx, providerID); serr == nil && st == "expired" {
		o.expect(expiredReason)
		o.note("the slip expired before it was paid (the sandbox's clock jumped)")
		return
	}
	o.problem("pay the slip %s: %v", providerID, err)
}

// complete3DS stands for the customer passing 3-D Secure: once the gateway's PaymentIntent asks for
// it (requires_action), the customer's browser confirms it again, which the sandbox takes as the
// challenge passed; the provider then tells the gateway by webhook (or its sweep asks).
func (l *load) complete3DS(ctx context.Context, o *Order) {
	deadline := time.Now().Add(l.cfg.ActWait)
	var last string
	for time.Now().Before(deadline) {
		if providerID, err := l.providerPaymentID(ctx, o.ID); err == nil {
			st, err := l.stripe(ctx, http.MethodGet, "/v1/payment_intents/"+providerID, nil)
			switch {
			case err != nil:
				last = err.Error()
			case st == "requires_action":
				if st, err = l.stripe(ctx, http.MethodPost, "/v1/payment_intents/"+providerID+"/confirm", url.Values{}); err == nil {
					o.note("passed 3-D Secure on %s: %s", providerID, st)
					return
				}
				last = err.Error()
			default:
				o.problem("3-D Secure: the PaymentIntent %s is %s, not requires_action", providerID, st)
				return
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	o.problem("3-D Secure never asked for within %s (last: %s)", l.cfg.ActWait, last)
}

// cancelAtOnce cancels right after placing: the order may not even be reserved yet.
func (l *load) cancelAtOnce(ctx context.Context, o *Order) { l.cancel(ctx, o, "at once", false) }

// cancelConfirmed cancels once the order is confirmed: before the carrier ships it, usually.
func (l *load) cancelConfirmed(ctx context.Context, o *Order) {
	if l.waitConfirmed(ctx, o) {
		l.cancel(ctx, o, "CONFIRMED", true)
	}
}

// waitConfirmed waits until the customer sees the order CONFIRMED, and reports whether it did.
// If not, the order's end is settled: a fault or an overload (orders down, the machine stalled,
// reads waiting in line) that kept the customer from reading the order while it was CONFIRMED
// left nothing to cancel, the order shipped and completes; anything else is movedOn's.
func (l *load) waitConfirmed(ctx context.Context, o *Order) bool {
	got, err := l.waitFor(ctx, o, "CONFIRMED", func(got customerOrder) bool { return got.Status == "CONFIRMED" })
	switch {
	case errors.Is(err, errMovedOn) && got.Status == "COMPLETED" && o.missed(got, "order.confirmed", "order.shipped"):
		o.expect("COMPLETED")
		o.note("shipped before the customer could see it CONFIRMED (no read answered in between)")
		return false
	case err != nil:
		l.movedOn(o, got, err)
		return false
	}
	return true
}

// missed reports whether the order went from event from to event to (its timeline's commit
// times) with none of the customer's reads answered in between. Every read answered while the
// order was between them would have shown it (the API reads strongly), so the customer never had
// the chance to act on that state. A read answered in between that did not show it was stale, and
// missed is false: the wait's failure stands.
func (o *Order) missed(got customerOrder, from, to string) bool {
	var start, end time.Time
	for _, e := range got.Timeline {
		switch e.EventType {
		case from:
			start = e.At
		case to:
			end = e.At
		}
	}
	if start.IsZero() || end.IsZero() || end.Before(start) {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.reads {
		if !r.Before(start) && r.Before(end) {
			return false
		}
	}
	return true
}

// cancelUnpaidSlip cancels an order whose slip the customer decided not to pay.
func (l *load) cancelUnpaidSlip(ctx context.Context, o *Order) {
	got, err := l.waitFor(ctx, o, "the slip", hasSlip)
	if err != nil {
		l.movedOn(o, got, err)
		return
	}
	l.cancel(ctx, o, "AWAITING_PAYMENT", false)
}

// cancelPaidSlip pays the slip, then cancels the confirmed order: the money is refunded.
func (l *load) cancelPaidSlip(ctx context.Context, o *Order) {
	l.paySlip(ctx, o)
	if o.Problem != "" || len(o.Expect) == 1 && o.Expect[0] == expiredReason {
		return
	}
	if l.waitConfirmed(ctx, o) {
		l.cancel(ctx, o, "CONFIRMED (paid)", true)
	}
}

// cancelAfterShipping tries to cancel an order that has shipped: 409, and nothing changes.
func (l *load) cancelAfterShipping(ctx context.Context, o *Order) {
	got, err := l.waitFor(ctx, o, "SHIPPED", func(got customerOrder) bool { return got.Status == "SHIPPED" || got.Status == "COMPLETED" })
	if err != nil {
		l.movedOn(o, got, err)
		return
	}
	code, _, err := cancelOrder(ctx, l.s, o)
	switch {
	case err != nil:
		o.problem("cancel after shipping: %v", err)
	case code != http.StatusConflict:
		o.problem("cancel after shipping: %d, want 409", code)
	default:
		o.note("cancel after shipping: 409")
	}
}

// cancel sends the customer's cancel and settles the order's expected end from the answer: 202
// cancelling (customer_request; one that raced the carrier may find the goods gone), 200 already
// cancelling or cancelled for another reason (that one), 409 shipped already (it completes).
func (l *load) cancel(ctx context.Context, o *Order, at string, confirmed bool) {
	code, got, err := cancelOrder(ctx, l.s, o)
	if err != nil {
		o.problem("cancel at %s: %v", at, err)
		return
	}
	o.note("cancel at %s: %d %s", at, code, got.state())
	switch code {
	case http.StatusAccepted:
		// A cancel sent before the order was confirmed can arrive after (it waited in line, the
		// customer retried it): the answer's timeline tells.
		if confirmed || got.reached("order.confirmed") {
			o.expect("CANCELLED customer_request", raced)
		} else {
			o.expect("CANCELLED customer_request")
		}
	case http.StatusOK:
		if got.CancelReason == nil {
			o.problem("cancel at %s: 200 without a cancel reason (%s)", at, got.state())
			return
		}
		o.expect("CANCELLED " + *got.CancelReason)
	case http.StatusConflict:
		o.expect("COMPLETED")
	default:
		o.problem("cancel at %s: %d", at, code)
	}
}

// providerPaymentID is the provider's id of the order's payment, once the gateway has it.
func (l *load) providerPaymentID(ctx context.Context, orderID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var id spanner.NullString
	found := false
	err := l.s.DB("payments").Single().Query(ctx, spanner.Statement{
		SQL:    "SELECT ProviderPaymentId FROM Payments WHERE OrderId = @id",
		Params: map[string]any{"id": orderID},
	}).Do(func(r *spanner.Row) error {
		found = true
		return r.Column(0, &id)
	})
	switch {
	case err != nil:
		return "", err
	case !found || !id.Valid:
		return "", fmt.Errorf("order %s has no provider payment yet", orderID)
	}
	return id.StringVal, nil
}

// slipStatus is the sandbox's status of a KOMOJU payment (GET /_sandbox/komoju/payments/{id}).
func (l *load) slipStatus(ctx context.Context, id string) (string, error) {
	var p struct {
		Status string `json:"status"`
	}
	err := l.sandboxGet(ctx, "/_sandbox/komoju/payments/"+id, &p)
	return p.Status, err
}

// sandboxGet reads one of the sandbox's /_sandbox/ read-backs.
func (l *load) sandboxGet(ctx context.Context, path string, v any) error {
	return sandboxGet(ctx, l.s, path, v)
}

func sandboxGet(ctx context.Context, s *harness.Stack, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Paysim.URL()+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s %s", path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// stripe calls the sandbox's Stripe API as the customer's browser would (with the shop's key, the
// way Stripe.js confirms), and returns the PaymentIntent's status.
func (l *load) stripe(ctx context.Context, method, path string, form url.Values) (string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, l.s.Paysim.URL()+path, body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+localenv.StripeAPIKey)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var pi struct {
		Status string `json:"status"`
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: %s %.200s", method, path, resp.Status, data)
	}
	err = json.Unmarshal(data, &pi)
	return pi.Status, err
}
