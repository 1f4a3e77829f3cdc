package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The audit is the operators' check of the saga, run by Cloud Scheduler (POST /admin/audit) and
// on demand: the stuck-order detector (stuck.go) finds orders that have waited too long for the
// next fact, and the reconciliation (reconcile.go) compares the orders that have settled with
// fulfillment's and the gateway's records of them. Both only read and report; an operator (or a
// replay of a dead letter, or the gateway's sweep) fixes what they find.

// Defaults of AuditConfig.
const (
	DefaultReconcileSettle = 2 * time.Minute
	DefaultReconcileWindow = 24 * time.Hour
	// DefaultStuckLimit is the most stuck orders listed per status; DefaultReconcileBatch the most
	// settled orders per status one reconciliation compares (each costs two peer reads).
	DefaultStuckLimit     = 200
	DefaultReconcileBatch = 200
	// stuckScanFactor bounds the orders the detector reads per status, as a multiple of the limit
	// (open slips are read and skipped).
	stuckScanFactor = 5
)

// AuditConfig configures an Audit. Zero values take the defaults.
type AuditConfig struct {
	Repo       Repository
	StuckAfter StuckAfter // nil: DefaultStuckAfter
	// Peers reads fulfillment and the gateway; nil: the reconciliation is not configured.
	Peers Peers
	// Settle and Window bound the orders the reconciliation compares: last changed between Window
	// and Settle ago.
	Settle, Window time.Duration
	StuckLimit     int
	ReconcileBatch int
	// RefundPayout is how long a cancelling order may wait for a refund its provider accepted and
	// has not paid out before it is reported stuck (DefaultRefundPayout).
	RefundPayout time.Duration
	Metrics      *AuditMetrics    // nil: no gauges
	Now          func() time.Time // nil: time.Now
}

// Audit runs the stuck-order detector and the reconciliation.
type Audit struct {
	repo                       Repository
	peers                      Peers
	stuckAfter                 StuckAfter
	settle, window             time.Duration
	stuckLimit, stuckScanLimit int
	reconcileBatch             int
	refundPayout               time.Duration
	metrics                    *AuditMetrics
	now                        func() time.Time
}

// NewAudit returns an audit configured by cfg.
func NewAudit(cfg AuditConfig) *Audit {
	a := &Audit{
		repo: cfg.Repo, peers: cfg.Peers, stuckAfter: cfg.StuckAfter, settle: cfg.Settle, window: cfg.Window,
		stuckLimit: cfg.StuckLimit, reconcileBatch: cfg.ReconcileBatch, refundPayout: cfg.RefundPayout, metrics: cfg.Metrics, now: cfg.Now,
	}
	if a.refundPayout <= 0 {
		a.refundPayout = DefaultRefundPayout
	}
	if a.stuckAfter == nil {
		a.stuckAfter = DefaultStuckAfter()
	}
	if a.settle <= 0 {
		a.settle = DefaultReconcileSettle
	}
	if a.window <= 0 {
		a.window = DefaultReconcileWindow
	}
	if a.stuckLimit <= 0 {
		a.stuckLimit = DefaultStuckLimit
	}
	a.stuckScanLimit = stuckScanFactor * (a.stuckLimit + 1)
	if a.reconcileBatch <= 0 {
		a.reconcileBatch = DefaultReconcileBatch
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a
}

// AuditReport is one run of the audit.
type AuditReport struct {
	Stuck          StuckReport
	Reconciliation Reconciliation
}

// Run runs the detector and the reconciliation and sets the gauges from what they found. It
// reports; it never changes an order. An error (the database) means nothing was reported and the
// gauges keep their last values; a peer that does not answer is not an error (a partial
// reconciliation).
func (a *Audit) Run(ctx context.Context) (AuditReport, error) {
	stuck, err := a.StuckOrders(ctx)
	if err != nil {
		return AuditReport{}, err
	}
	rec, err := a.Reconcile(ctx)
	if err != nil {
		return AuditReport{}, err
	}
	a.metrics.set(stuck, rec)
	return AuditReport{Stuck: stuck, Reconciliation: rec}, nil
}

// AuditMetrics are the audit's gauges, set by each Run: alert on them (see the README).
type AuditMetrics struct {
	stuck      *prometheus.GaugeVec
	mismatches *prometheus.GaugeVec
	unchecked  *prometheus.GaugeVec
	attention  *prometheus.GaugeVec
}

// NewAuditMetrics returns the gauges, registered with reg unless it is nil (once per registry).
func NewAuditMetrics(reg prometheus.Registerer) *AuditMetrics {
	m := &AuditMetrics{
		stuck: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orders_stuck",
			Help: "Orders the last audit found stuck (longer than STUCK_AFTER in a non-terminal status), by status.",
		}, []string{"status"}),
		mismatches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orders_reconciliation_mismatches",
			Help: "Settled orders the last audit found contradicted by fulfillment's or the gateway's records, by check.",
		}, []string{"check"}),
		unchecked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orders_reconciliation_unchecked",
			Help: "Settled orders the last audit could not compare because the peer did not answer, by peer.",
		}, []string{"peer"}),
		attention: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orders_needing_attention",
			Help: "Orders NEEDS_ATTENTION (a capture or a compensation failed for good) among those the last audit reconciled, by reason.",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.stuck, m.mismatches, m.unchecked, m.attention)
	}
	return m
}

// set publishes a run's counts; every label value is set, zeros included, so a cleared problem
// clears its alert. An unconfigured reconciliation sets no reconciliation gauges.
func (m *AuditMetrics) set(stuck StuckReport, rec Reconciliation) {
	if m == nil {
		return
	}
	for status, n := range stuck.Counts {
		m.stuck.WithLabelValues(string(status)).Set(float64(n))
	}
	if !rec.Configured {
		return
	}
	byCheck := map[string]int{}
	for _, c := range Checks() {
		byCheck[c] = 0
	}
	for _, mm := range rec.Mismatches {
		byCheck[mm.Check]++
	}
	for c, n := range byCheck {
		m.mismatches.WithLabelValues(c).Set(float64(n))
	}
	for _, peer := range []string{PeerFulfillment, PeerGateway} {
		m.unchecked.WithLabelValues(peer).Set(float64(rec.Unchecked[peer]))
	}
	// The reasons are few (the saga's failure kinds); those gone since the last run are dropped.
	m.attention.Reset()
	for _, f := range rec.Flagged {
		m.attention.WithLabelValues(f.Reason).Inc()
	}
}
