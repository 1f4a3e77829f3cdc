package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/spanner"
	pprofile "github.com/google/pprof/profile"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/emulator/spanneremu"
)

// ---- rate mode: orders through the whole saga at fixed rates ----

// window is one rate's measurements. Its orders are placed open loop for -duration; then the
// bench waits (up to -settle) until every one of them ended (COMPLETED or CANCELLED) and every
// outbox is empty, and reads what happened from the databases' commit timestamps.
type window struct {
	rate             float64
	mix              []string // the payment methods used in turn
	start, settledAt time.Time
	placed, errs     int64
	errSample        string
	// shed are the orders refused with 503 (the orders service's admission control: the client
	// may resend them), shedP99 how long their refusal took.
	shed             int64
	shedP99          time.Duration
	elapsed          time.Duration // first request → last answer
	issued           time.Duration // first request → last request sent
	postP50, postP99 time.Duration
	pubAll           float64 // events published while placing (all relays)
	ended, pending   int     // orders that ended / did not within -settle
	statuses         map[string]int
	methods          map[string]string // order id → payment method
	milestones       map[string]map[string][]time.Duration
	hops             []hop
	cpu              map[string]float64 // CPU seconds while placing, per process
	benchCPU         float64
	cpuTotal         float64          // every process, window start → settled
	cpuServices      float64          // the services and the relays, window start → settled
	spanner          spanneremu.Stats // while placing
	spannerAll       spanneremu.Stats // window start → settled
	// stmtCPU is the CPU seconds the Spanner emulator's work took while placing, by database and
	// statement (-statements: spanneremu.StatementLabel); nil without.
	stmtCPU    map[string]map[string]float64
	slipsPaid  int64
	dispatches float64 // Cloud Tasks attempts, window start → settled
}

func (b *bench) rates(ctx context.Context) error {
	ceiling, err := b.ceiling(ctx)
	if err != nil {
		return err
	}
	var ws []*window
	for _, r := range b.o.rates {
		mixes := [][]string{b.o.methods}
		if b.o.perMethod {
			mixes = nil
			for _, m := range b.o.methods {
				mixes = append(mixes, []string{m})
			}
		}
		for _, methods := range mixes {
			w, err := b.window(ctx, r, b.o.duration, methods)
			if err != nil {
				return err
			}
			ws = append(ws, w)
		}
	}
	b.report(ws, ceiling)
	return nil
}

func (b *bench) window(ctx context.Context, rate float64, d time.Duration, methods []string) (*window, error) {
	w := &window{rate: rate, mix: methods, statuses: map[string]int{}}
	logf("rate %v orders/s for %s (%s)", rate, d, strings.Join(methods, ", "))
	before, err := b.scrapeAll(ctx)
	if err != nil {
		return nil, err
	}
	cpu0 := selfCPU()
	sp0 := b.s.SpannerStats()
	b.windows++
	profiled, err := b.profile(ctx, d)
	if err != nil {
		return nil, err
	}
	payer := b.startSlipPayer(ctx)

	pl := newPlacement(payer)
	if err := b.placeOpenLoop(ctx, pl, rate, int(rate*d.Seconds()), methods, nil); err != nil {
		return nil, err
	}
	w.start, w.issued = pl.start, pl.issued
	pl.wait()
	if prof := profiled(); prof != nil && b.o.statements {
		w.stmtCPU, err = statementCPU(prof)
		if err != nil {
			return nil, err
		}
	}
	w.elapsed = time.Since(w.start)
	placedAt, err := b.scrapeAll(ctx)
	if err != nil {
		return nil, err
	}
	w.benchCPU = selfCPU() - cpu0
	w.spanner = statsSince(sp0, b.s.SpannerStats())
	w.methods, w.errSample = pl.methods, pl.errSample
	post, shed := pl.took(outAccepted), pl.took(outShed)
	w.placed, w.errs = int64(len(w.methods)), int64(len(pl.took(outFailed, outTimeout)))
	w.shed, w.shedP99 = int64(len(shed)), pct(shed, 99)
	w.postP50, w.postP99 = pct(post, 50), pct(post, 99)
	w.pubAll = delta(before, placedAt, "relays", "outbox_published_events_total", "")
	w.cpu = map[string]float64{}
	for _, p := range append(consumerNames(), b.relays...) {
		w.cpu[p] = delta(before, placedAt, p, "process_cpu_seconds_total", "")
	}

	if err := b.waitEnded(ctx, w, pl.ids(), time.Now().Add(b.o.settle)); err != nil {
		return nil, err
	}
	w.slipsPaid = payer.stop()
	w.settledAt = time.Now()
	settled, err := b.scrapeAll(ctx)
	if err != nil {
		return nil, err
	}
	w.spannerAll = statsSince(sp0, b.s.SpannerStats())
	w.dispatches = delta(before, settled, "tasks", "tasksemu_attempts_total", "")
	for _, p := range append(consumerNames(), b.relays...) {
		w.cpuServices += delta(before, settled, p, "process_cpu_seconds_total", "")
	}
	w.cpuTotal = selfCPU() - cpu0 + w.cpuServices
	if w.milestones, err = b.milestones(ctx, w.methods); err != nil {
		return nil, err
	}
	if w.hops, err = b.hops(ctx, w.start, w.settledAt); err != nil {
		return nil, err
	}
	logf("  placed %d (%d shed, %d errors) in %s; %d ended, %d not within %s", w.placed, w.shed, w.errs, w.elapsed.Round(time.Millisecond), w.ended, w.pending, b.o.settle)
	return w, nil
}

// paymentBody is the payment of a bench order by method: a card that authorizes, the bench
// customer's PayPay wallet (funded for the whole run), or a konbini or bank transfer slip that
// the slip payer pays as soon as the gateway recorded it.
func paymentBody(method string) string {
	switch method {
	case "card":
		return `{"method":"card","payment_method":"pm_card_visa"}`
	case "konbini":
		return `{"method":"konbini","store":"lawson"}`
	default: // wallet, bank_transfer
		return fmt.Sprintf(`{"method":%q}`, method)
	}
}

func (b *bench) place(ctx context.Context, method string) (string, error) {
	sku := b.skus[rand.IntN(len(b.skus))]
	body := fmt.Sprintf(`{"customer_id":%q,"email":"bench@example.com","lines":[{"sku":%q,"quantity":1}],"payment":%s}`,
		benchCustomer, sku, paymentBody(method))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.s.URL("orders")+"/v1/orders", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	token, err := b.s.CustomerToken(ctx, benchCustomer)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", uuid.NewString())
	resp, err := b.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" {
		return "", errShed
	}
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST /v1/orders: %d %.200s", resp.StatusCode, data)
	}
	var o struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &o); err != nil || o.ID == "" {
		return "", fmt.Errorf("POST /v1/orders: no id in %.200s", data)
	}
	return o.ID, nil
}

// errShed is an order the orders service refused with 503 and Retry-After: shed by its admission
// control, not an error.
var errShed = errors.New("shed: 503 with Retry-After")

// benchCustomer places every order; the sandbox funds its wallet for the whole run.
const benchCustomer = "bench"

// waitEnded waits until every order of the window is terminal (COMPLETED, CANCELLED or
// NEEDS_ATTENTION: nothing more happens to it by itself) and every outbox is empty (the
// last e-mail intents included), or deadline; it counts the orders by final status.
func (b *bench) waitEnded(ctx context.Context, w *window, ids []string, deadline time.Time) error {
	for {
		open, err := b.countP(ctx, "orders", "SELECT COUNT(*) FROM Orders WHERE OrderId IN UNNEST(@ids) AND Status NOT IN ('COMPLETED', 'CANCELLED', 'NEEDS_ATTENTION')", ids)
		if err != nil {
			return err
		}
		pending := int64(0)
		if open == 0 {
			if pending, err = b.unpublished(ctx); err != nil {
				return err
			}
		}
		if (open == 0 && pending == 0) || time.Now().After(deadline) {
			w.pending = int(open)
			w.ended = len(ids) - w.pending
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return b.s.DB("orders").Single().Query(ctx, spanner.Statement{
		SQL:    "SELECT Status, COUNT(*) FROM Orders WHERE OrderId IN UNNEST(@ids) GROUP BY Status",
		Params: map[string]any{"ids": ids},
	}).Do(func(r *spanner.Row) error {
		var st string
		var n int64
		if err := r.Columns(&st, &n); err != nil {
			return err
		}
		w.statuses[st] = int(n)
		return nil
	})
}

// unpublished counts the outbox rows not yet published, over every source database.
func (b *bench) unpublished(ctx context.Context) (int64, error) {
	total := int64(0)
	for _, db := range sourceDatabases() {
		n, err := b.count(ctx, db, "SELECT COUNT(*) FROM OutboxEvents WHERE PublishedAt IS NULL")
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// slipPayer plays the customers who pay their konbini and bank transfer slips: as soon as the
// gateway recorded the slip of an order it watches (payment PENDING with the provider's id), it
// pays it in the sandbox. It looks only at the orders it watches, by key: a scan of every
// PENDING payment 20 times a second grew with the Payments table and took the stack's CPU.
type slipPayer struct {
	b      *bench
	mu     sync.Mutex
	orders map[string]bool // order ids whose slip is not paid yet
	cancel context.CancelFunc
	done   chan struct{}
	n      atomic.Int64
}

func (b *bench) startSlipPayer(ctx context.Context) *slipPayer {
	ctx, cancel := context.WithCancel(ctx)
	p := &slipPayer{b: b, orders: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			p.payDue(ctx)
		}
	}()
	return p
}

// watch adds an order whose slip the payer pays once the gateway has issued it.
func (p *slipPayer) watch(orderID string) {
	p.mu.Lock()
	p.orders[orderID] = true
	p.mu.Unlock()
}

func (p *slipPayer) payDue(ctx context.Context) {
	p.mu.Lock()
	ids := make([]string, 0, len(p.orders))
	for id := range p.orders {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	type slip struct{ order, payment string }
	var due []slip
	err := p.b.s.DB("payments").Single().Query(ctx, spanner.Statement{
		SQL: `SELECT OrderId, ProviderPaymentId FROM Payments@{FORCE_INDEX=PaymentsByOrder}
			WHERE OrderId IN UNNEST(@ids) AND Status = 'PENDING' AND ProviderPaymentId IS NOT NULL`,
		Params: map[string]any{"ids": ids},
	}).Do(func(r *spanner.Row) error {
		var s slip
		if err := r.Columns(&s.order, &s.payment); err != nil {
			return err
		}
		due = append(due, s)
		return nil
	})
	if err != nil {
		return // the next pass retries
	}
	for _, s := range due {
		if err := p.b.s.Paysim.PayKomojuSlip(s.payment); err != nil {
			logf("  pay slip %s: %v", s.payment, err)
			continue
		}
		p.mu.Lock()
		delete(p.orders, s.order)
		p.mu.Unlock()
		p.n.Add(1)
	}
}

// stop ends the payer and returns how many slips it paid.
func (p *slipPayer) stop() int64 {
	p.cancel()
	<-p.done
	return p.n.Load()
}

// milestones reads each order's way through the saga from its timeline: the commit of the
// order, then of each event it emitted (RecordedAt is the commit timestamp of the transaction
// that emitted it), so every figure is commit to commit on one clock. By method, then event.
func (b *bench) milestones(ctx context.Context, methods map[string]string) (map[string]map[string][]time.Duration, error) {
	ids := make([]string, 0, len(methods))
	for id := range methods {
		ids = append(ids, id)
	}
	out := map[string]map[string][]time.Duration{}
	err := b.s.DB("orders").Single().Query(ctx, spanner.Statement{
		SQL: `SELECT o.OrderId, t.EventType, TIMESTAMP_DIFF(t.RecordedAt, o.CreatedAt, MICROSECOND)
			FROM Orders o JOIN OrderTimeline t ON t.OrderId = o.OrderId
			WHERE o.OrderId IN UNNEST(@ids) AND t.Direction = 'emitted' AND t.EventType IN UNNEST(@types)`,
		Params: map[string]any{"ids": ids, "types": milestoneTypes},
	}).Do(func(r *spanner.Row) error {
		var id, typ string
		var us int64
		if err := r.Columns(&id, &typ, &us); err != nil {
			return err
		}
		m := methods[id]
		if out[m] == nil {
			out[m] = map[string][]time.Duration{}
		}
		out[m][typ] = append(out[m][typ], time.Duration(us)*time.Microsecond)
		return nil
	})
	for _, byType := range out {
		for _, d := range byType {
			sortDur(d)
		}
	}
	return out, err
}

// countsSince is the counters of b that grew since a, by how much (nil if none did).
func countsSince(a, b map[string]int64) map[string]int64 {
	var out map[string]int64
	for k, n := range b {
		if n -= a[k]; n > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[k] = n
		}
	}
	return out
}

// milestoneTypes are the order's events the bench times from the order's commit.
var milestoneTypes = []string{"order.awaiting_payment", "order.confirmed", "order.shipped", "order.completed", "order.cancelled"}

// statementCPU sums a CPU profile's samples by the database and statement that spanneremu
// labelled them with (Options.CountStatements), in CPU seconds.
func statementCPU(prof []byte) (map[string]map[string]float64, error) {
	p, err := pprofile.ParseData(prof)
	if err != nil {
		return nil, fmt.Errorf("the bench process's CPU profile: %w", err)
	}
	cpu := slices.IndexFunc(p.SampleType, func(t *pprofile.ValueType) bool { return t.Type == "cpu" && t.Unit == "nanoseconds" })
	if cpu < 0 {
		return nil, fmt.Errorf("the bench process's CPU profile has no cpu nanoseconds among %v", p.SampleType)
	}
	out := map[string]map[string]float64{}
	for _, s := range p.Sample {
		db, stmt := s.Label[spanneremu.DatabaseLabel], s.Label[spanneremu.StatementLabel]
		if len(db) != 1 || len(stmt) != 1 {
			continue
		}
		if out[db[0]] == nil {
			out[db[0]] = map[string]float64{}
		}
		out[db[0]][stmt[0]] += float64(s.Value[cpu]) / 1e9
	}
	return out, nil
}

// statsSince is the Spanner emulator's counters from a to b.
func statsSince(a, b spanneremu.Stats) spanneremu.Stats {
	out := spanneremu.Stats{Commits: b.Commits - a.Commits, LockTimeouts: b.LockTimeouts - a.LockTimeouts, LockQueueWaits: b.LockQueueWaits - a.LockQueueWaits,
		Conflicts: b.Conflicts - a.Conflicts, IdleAborts: b.IdleAborts - a.IdleAborts, Wounds: b.Wounds - a.Wounds, ReaderWaits: b.ReaderWaits - a.ReaderWaits,
		ExclusiveWaits: b.ExclusiveWaits - a.ExclusiveWaits, LockWaits: b.LockWaits - a.LockWaits, LockWaited: b.LockWaited - a.LockWaited,
		QueryRechecks: b.QueryRechecks - a.QueryRechecks, GroupedCommits: b.GroupedCommits - a.GroupedCommits, DecidedDML: b.DecidedDML - a.DecidedDML,
		CommitHolds: b.CommitHolds - a.CommitHolds, CommitHeld: b.CommitHeld - a.CommitHeld,
		LongCommitHolds: b.LongCommitHolds - a.LongCommitHolds, LongCommitHeld: b.LongCommitHeld - a.LongCommitHeld,
		ByDatabase: map[string]spanneremu.DatabaseStats{}}
	for db, s := range b.ByDatabase {
		d := spanneremu.DatabaseStats{Commits: s.Commits - a.ByDatabase[db].Commits, RowsWritten: s.RowsWritten - a.ByDatabase[db].RowsWritten}
		d.ConflictsBy = countsSince(a.ByDatabase[db].ConflictsBy, s.ConflictsBy)
		d.HeldLocks = countsSince(a.ByDatabase[db].HeldLocks, s.HeldLocks)
		d.RPCs = countsSince(a.ByDatabase[db].RPCs, s.RPCs)
		d.Statements = countsSince(a.ByDatabase[db].Statements, s.Statements)
		out.ByDatabase[db] = d
	}
	return out
}
