package soak

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
)

// DrainReport is how the system came to rest after the load.
type DrainReport struct {
	Took    time.Duration
	Drained bool
	// NotDrained lists what was still moving when the bound passed.
	NotDrained []string
}

// drain waits, on conditions and within cfg.DrainTimeout, for the system to come to rest:
//
//  1. every order terminal except those waiting for an unpaid slip (the customers' journeys are
//     over, so nobody will pay them), dead letters a fault explains replayed as an operator would;
//  2. the sandbox's clock jumps 7 days: the unpaid slips expire;
//  3. at rest: every order terminal, every outbox row published, every queue empty, no provider
//     call or e-mail left to do, twice in a row with the same counts;
//  4. the delivery ledger settled: every published (event, subscriber) pair confirmed by its
//     subscriber (the relay audits every 5 s; the drain asks for a pass too).
func drain(ctx context.Context, s *harness.Stack, l *load, in *injector, cfg Config, logf func(string, ...any)) (DrainReport, []DeadLetter) {
	start := time.Now()
	deadline := start.Add(cfg.DrainTimeout)
	rep := DrainReport{}
	var dead []DeadLetter
	step := func(what string, cond func(ctx context.Context) (bool, []string)) bool {
		var why []string
		for {
			var ok bool
			if ok, why = cond(ctx); ok {
				logf("[%s] drain: %s", in.stamp(time.Now()), what)
				return true
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				rep.NotDrained = append(rep.NotDrained, fmt.Sprintf("not %s:", what))
				for _, w := range why {
					rep.NotDrained = append(rep.NotDrained, "  "+w)
				}
				return false
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	replayed := map[string]bool{}
	settledOrders := func(ctx context.Context, unpaidSlips bool) (bool, []string) {
		var why []string
		d, err := listDeadLetters(ctx, s, in.Faults())
		if err != nil {
			return false, []string{err.Error()}
		}
		dead = mergeDeadLetters(dead, d)
		for i := range dead {
			if dl := &dead[i]; dl.Explanation != "" && !replayed[dl.Consumer+"/"+dl.EventID] {
				replayed[dl.Consumer+"/"+dl.EventID] = true
				dl.Replayed = replayDeadLetter(ctx, s, *dl)
				logf("[%s] drain: dead letter %s", in.stamp(time.Now()), dl)
			}
		}
		counts, err := orderCounts(ctx, s)
		if err != nil {
			return false, []string{err.Error()}
		}
		for st, n := range counts {
			if !terminal(st) && !(unpaidSlips && st == "AWAITING_PAYMENT") {
				why = append(why, fmt.Sprintf("%d orders %s", n, st))
			}
		}
		sort.Strings(why)
		return len(why) == 0, why
	}

	ok := step("every order terminal or waiting for an unpaid slip", func(ctx context.Context) (bool, []string) { return settledOrders(ctx, true) })
	if ok {
		l.jump(finalClockJump)
	}
	var last string
	ok = ok && step("at rest: every order terminal, every outbox published, every queue empty, nothing left to send", func(ctx context.Context) (bool, []string) {
		done, why := settledOrders(ctx, false)
		if !done {
			last = ""
			return false, why
		}
		fp, why := atRest(ctx, s)
		if len(why) > 0 {
			last = ""
			return false, why
		}
		if fp != last { // settled once: check that it stays so (a late webhook can still emit)
			last = fp
			return false, []string{"settled once; checking that it stays so"}
		}
		return true, nil
	})
	ok = ok && step("the delivery ledger settled (every published delivery confirmed by its subscriber)", func(ctx context.Context) (bool, []string) {
		if r, err := s.AdminDo(ctx, http.MethodPost, topology.Relay, outboxapi.PathLedgerAudit, nil); err != nil || r.Status != http.StatusOK {
			return false, []string{fmt.Sprintf("POST %s: %v %v", outboxapi.PathLedgerAudit, r, err)}
		}
		var why []string
		for _, db := range topology.Databases() {
			n, err := count(ctx, s, db, `SELECT COUNT(*) FROM OutboxEvents@{FORCE_INDEX=OutboxUnaudited} WHERE AuditShard IS NOT NULL`)
			if err != nil {
				return false, []string{err.Error()}
			}
			if n > 0 {
				why = append(why, fmt.Sprintf("%s: %d published rows not yet confirmed by every subscriber", db, n))
			}
		}
		return len(why) == 0, why
	})
	rep.Drained = ok
	rep.Took = time.Since(start)
	return rep, dead
}

// atRest reports what is still moving and, when nothing is, a fingerprint of the state (counts of
// outbox rows, processed events and e-mails) that a second look must find unchanged.
func atRest(ctx context.Context, s *harness.Stack) (string, []string) {
	var why []string
	fp := ""
	for _, db := range topology.Databases() {
		n, err := count(ctx, s, db, pendingCountSQL)
		if err != nil {
			return "", []string{err.Error()}
		}
		if n > 0 {
			why = append(why, fmt.Sprintf("%s: %d unpublished outbox rows", db, n))
		}
		rows, err := count(ctx, s, db, `SELECT COUNT(*) FROM OutboxEvents`)
		if err != nil {
			return "", []string{err.Error()}
		}
		applied, err := count(ctx, s, db, `SELECT COUNT(*) FROM ProcessedEvents`)
		if err != nil {
			return "", []string{err.Error()}
		}
		fp += fmt.Sprintf("%s:%d/%d ", db, rows, applied)
	}
	qs, err := s.Queues(ctx)
	if err != nil {
		return "", []string{"the Tasks emulator's status: " + err.Error()}
	}
	for _, id := range topology.Queues() {
		if q := qs[id]; q.Depth > 0 || q.InFlight > 0 || q.State != "RUNNING" {
			why = append(why, fmt.Sprintf("queue %s %s: %d tasks, %d in flight", id, q.State, q.Depth, q.InFlight))
		}
	}
	for _, c := range []struct{ db, sql, what string }{
		{"payments", `SELECT COUNT(*) FROM ProviderRequests WHERE Status = 'STARTED'`, "provider calls not finished"},
		{"notifications", `SELECT COUNT(*) FROM Notifications WHERE Status = 'PENDING'`, "e-mails not sent"},
	} {
		n, err := count(ctx, s, c.db, c.sql)
		if err != nil {
			return "", []string{err.Error()}
		}
		if n > 0 {
			why = append(why, fmt.Sprintf("%s: %d %s", c.db, n, c.what))
		}
		fp += fmt.Sprintf("%s:%d ", c.db, n)
	}
	mails := len(s.Mail.Messages())
	return fmt.Sprintf("%smail:%d", fp, mails), why
}

const pendingCountSQL = `SELECT COUNT(*) FROM OutboxEvents@{FORCE_INDEX=OutboxPending} WHERE PendingShard IS NOT NULL`

// orderCounts counts the orders by status.
func orderCounts(ctx context.Context, s *harness.Stack) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out := map[string]int64{}
	err := s.DB("orders").Single().Query(ctx, spanner.Statement{SQL: `SELECT Status, COUNT(*) FROM Orders GROUP BY Status`}).Do(func(r *spanner.Row) error {
		var st string
		var n int64
		if err := r.Columns(&st, &n); err != nil {
			return err
		}
		out[st] = n
		return nil
	})
	return out, err
}

// count runs a query of one INT64.
func count(ctx context.Context, s *harness.Stack, db, sql string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var n int64
	err := s.DB(db).Single().Query(ctx, spanner.Statement{SQL: sql}).Do(func(r *spanner.Row) error { return r.Column(0, &n) })
	if err != nil {
		return 0, fmt.Errorf("%s: %s: %w", db, sql, err)
	}
	return n, nil
}

// listDeadLetters asks every consumer for its dead letters not yet replayed (GET
// /admin/deadletters, as an operator) and explains each by the faults.
func listDeadLetters(ctx context.Context, s *harness.Stack, faults []*Fault) ([]DeadLetter, error) {
	var out []DeadLetter
	for _, svc := range topology.Consumers() {
		var list struct {
			DeadLetters []struct {
				EventID   string    `json:"event_id"`
				EventType string    `json:"event_type"`
				Attempts  int64     `json:"attempts"`
				LastError string    `json:"last_error"`
				DeadAt    time.Time `json:"dead_at"`
			} `json:"dead_letters"`
		}
		if err := adminGet(ctx, s, svc.Name, "/admin/deadletters", &list); err != nil {
			return nil, err
		}
		for _, d := range list.DeadLetters {
			dl := DeadLetter{Consumer: svc.Name, EventID: d.EventID, EventType: d.EventType, Attempts: d.Attempts, LastError: d.LastError, DeadAt: d.DeadAt}
			dl.Explanation = explain(dl, faults)
			out = append(out, dl)
		}
	}
	return out, nil
}

// explain names the fault that explains a dead letter, or "". Only the gateway answers failures
// because of a fault of the soak: while the provider answers 500s (and its circuit is open
// after), each delivery of an event that calls it is answered 503 and counted, and enough of them
// in a row dead-letter the event. Everything else the soak does leaves a consumer unreachable
// (which its count ignores) or delays deliveries (whose early answers have hours of patience).
func explain(d DeadLetter, faults []*Fault) string {
	if d.Consumer != topology.Gateway {
		return ""
	}
	for _, f := range faults {
		if f.Kind == KindProvider && !d.DeadAt.Before(f.Started) && !d.DeadAt.After(f.Ended.Add(30*time.Second)) {
			return fmt.Sprintf("%s at %s", f, f.Started.Format("15:04:05.0"))
		}
	}
	return ""
}

func mergeDeadLetters(have, more []DeadLetter) []DeadLetter {
	seen := map[string]bool{}
	for _, d := range have {
		seen[d.Consumer+"/"+d.EventID] = true
	}
	for _, d := range more {
		if !seen[d.Consumer+"/"+d.EventID] {
			have = append(have, d)
		}
	}
	return have
}

// replayDeadLetter replays an explained dead letter as an operator, with the reason.
func replayDeadLetter(ctx context.Context, s *harness.Stack, d DeadLetter) string {
	r, err := s.AdminDo(ctx, http.MethodPost, d.Consumer, "/admin/deadletters/"+d.EventID+"/replay",
		map[string]string{"reason": "soak: " + d.Explanation})
	if err != nil {
		return "replay failed: " + err.Error()
	}
	if r.Status != http.StatusOK {
		return "replay failed: " + strings.TrimSpace(r.String())
	}
	return "replayed: " + strings.TrimSpace(string(r.Body))
}
