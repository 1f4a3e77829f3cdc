package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/spanmart/spanmart/internal/adminclient"
)

// stuck: orders' stuck-order detector. Exit 1 when an order is stuck.
func parseStuck(args []string) (command, error) {
	return report(args, "stuck", (*adminclient.Client).StuckOrders, (*cli).printStuck, stuckCode)
}

// report is a command without arguments that reads one report, prints it (as a table or JSON)
// and exits as code says of it.
func report[T any](args []string, name string, read func(*adminclient.Client, context.Context) (T, error), print func(*cli, T), code func(T) int) (command, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if _, err := parseArgs(fs, args); err != nil {
		return nil, err
	}
	return func(ctx context.Context, c *cli) int {
		rep, err := read(c.client, ctx)
		if err != nil {
			return c.failed(err)
		}
		if c.json {
			c.printJSON(rep)
		} else {
			print(c, rep)
		}
		return code(rep)
	}, nil
}

func stuckCode(rep adminclient.StuckReport) int {
	if len(rep.Orders) > 0 {
		return exitProblem
	}
	return exitOK
}

func (c *cli) printStuck(rep adminclient.StuckReport) {
	if len(rep.Orders) == 0 {
		fmt.Fprintln(c.out, "no stuck orders")
	} else {
		w := table(c.out)
		row(w, "ORDER", "STATUS", "SINCE", "FOR", "WAITING FOR", "CANCEL REASON")
		for _, o := range rep.Orders {
			row(w, o.OrderID, o.Status, stamp(&o.Since), o.For, o.WaitingFor, orDash(o.CancelReason))
		}
		w.Flush()
	}
	if len(rep.Truncated) > 0 {
		fmt.Fprintf(c.out, "truncated: more orders may be stuck in %s\n", strings.Join(rep.Truncated, ", "))
	}
}

// reconcile: orders' reconciliation. Exit 5 when it is not configured or partial (a peer did not
// answer for some order), else 1 when it found a mismatch or an order that needs attention.
func parseReconcile(args []string) (command, error) {
	return report(args, "reconcile", (*adminclient.Client).Reconciliation, (*cli).printReconciliation, reconcileCode)
}

func reconcileCode(rec adminclient.Reconciliation) int {
	switch {
	case !rec.Configured || rec.Partial:
		return exitFailure
	case len(rec.Mismatches) > 0 || len(rec.Flagged) > 0:
		return exitProblem
	}
	return exitOK
}

func (c *cli) printReconciliation(rec adminclient.Reconciliation) {
	if !rec.Configured {
		fmt.Fprintf(c.out, "reconciliation not configured: %s\n", rec.Detail)
		return
	}
	fmt.Fprintf(c.out, "%d orders checked, last changed from %s to %s\n", rec.Checked, stamp(&rec.Window.From), stamp(&rec.Window.To))
	if len(rec.Mismatches) > 0 {
		fmt.Fprintln(c.out)
		w := table(c.out)
		row(w, "ORDER", "STATUS", "CHECK", "PROBLEMS", "FULFILLMENT", "GATEWAY")
		for _, m := range rec.Mismatches {
			row(w, m.OrderID, m.Status, m.Check, strings.Join(m.Problems, "; "), reservationOf(m.Fulfillment), paymentsOf(m.Gateway))
		}
		w.Flush()
	}
	if len(rec.Flagged) > 0 {
		fmt.Fprintln(c.out)
		w := table(c.out)
		row(w, "NEEDS ATTENTION", "SINCE", "REASON", "FULFILLMENT", "GATEWAY")
		for _, f := range rec.Flagged {
			row(w, f.OrderID, stamp(&f.Since), f.AttentionReason, reservationOf(f.Fulfillment), paymentsOf(f.Gateway))
		}
		w.Flush()
	}
	if len(rec.Mismatches) == 0 && len(rec.Flagged) == 0 {
		fmt.Fprintln(c.out, "no mismatches")
	}
	peers := make([]string, 0, len(rec.Unreachable))
	for p := range rec.Unreachable {
		peers = append(peers, p)
	}
	sort.Strings(peers)
	for _, p := range peers {
		fmt.Fprintf(c.out, "partial: %s did not answer for %d order(s): %s\n", p, rec.Unchecked[p], rec.Unreachable[p])
	}
	if len(rec.Truncated) > 0 {
		fmt.Fprintf(c.out, "truncated: more settled orders in %s than one batch\n", strings.Join(rec.Truncated, ", "))
	}
}

func reservationOf(f adminclient.PeerFulfillment) string {
	switch {
	case f.Error != "":
		return "error: " + clip(f.Error, 40)
	case f.Reservation == nil:
		return "no reservation"
	}
	return *f.Reservation
}

func paymentsOf(g adminclient.PeerGateway) string {
	if g.Error != "" {
		return "error: " + clip(g.Error, 40)
	}
	if len(g.Payments) == 0 {
		return "no payment"
	}
	var out []string
	for _, p := range g.Payments {
		out = append(out, p.Status)
	}
	return strings.Join(out, ", ")
}

// audit: orders' POST /admin/audit (both checks, logged by orders and published as its gauges).
// Exit: reconcile's 5 first, then 1 when an order is stuck, mismatched or needs attention.
func parseAudit(args []string) (command, error) {
	return report(args, "audit", (*adminclient.Client).Audit, func(c *cli, rep adminclient.AuditReport) {
		fmt.Fprintln(c.out, "STUCK ORDERS")
		c.printStuck(rep.Stuck)
		fmt.Fprintln(c.out, "\nRECONCILIATION")
		c.printReconciliation(rep.Reconciliation)
	}, func(rep adminclient.AuditReport) int {
		return worst(stuckCode(rep.Stuck), reconcileCode(rep.Reconciliation))
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
