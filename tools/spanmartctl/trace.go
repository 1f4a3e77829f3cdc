package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/spanmart/spanmart/internal/adminclient"
)

// order trace ORDER_ID: the order's hops (adminclient.Trace). Exit 4 when neither orders nor the
// relay knows the order; 3 or 5 when a service did not answer (what it would have given is
// missing); 1 when the trace shows a problem (the order stuck, mismatched or needing attention, an
// event quarantined, a delivery dead-lettered); 0 otherwise.
func parseTrace(args []string) (command, error) {
	fs := flag.NewFlagSet("order trace", flag.ContinueOnError)
	pos, err := parseArgs(fs, args, "ORDER_ID")
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, c *cli) int {
		tr, err := c.client.Trace(ctx, pos[0])
		if c.json {
			c.printJSON(tr)
		} else {
			c.printTrace(tr)
		}
		if errors.Is(err, adminclient.ErrNotFound) {
			fmt.Fprintf(c.errOut, "spanmartctl: %v\n", err)
			return worst(exitNotFound, gapsCode(tr.Gaps))
		}
		if err != nil {
			return c.failed(err)
		}
		code := exitOK
		if len(tr.Problems) > 0 {
			code = exitProblem
		}
		return worst(code, gapsCode(tr.Gaps))
	}, nil
}

// traceTime is the time column of a trace: the commit time, to the millisecond, in UTC.
const traceTime = "2006-01-02 15:04:05.000"

func (c *cli) printTrace(tr adminclient.Trace) {
	status := tr.Status
	if status == "" {
		status = "(status unknown)"
	}
	fmt.Fprintf(c.out, "order %s %s\n\n", tr.OrderID, status)
	if len(tr.Hops) > 0 {
		slowest := tr.Slowest()
		w := table(c.out)
		row(w, "TIME", "EVENT", "SOURCE → SUBSCRIBER", "COMMITTED→PUBLISHED", "→APPLIED", "END-TO-END", "EVENT ID")
		for i, h := range tr.Hops {
			sub := h.Subscriber
			if sub == "" {
				sub = "(no subscriber)"
			}
			published := latency(h.PublishLatency, "pending")
			if h.Quarantined {
				published = "quarantined"
			}
			applied, endToEnd := latency(h.DeliveryLatency, "-"), latency(h.EndToEnd, "-")
			switch {
			case h.Subscriber == "":
				applied, endToEnd = "", ""
			case h.ProcessedUnknown:
				applied, endToEnd = "?", "?"
			case h.DeadLettered:
				applied, endToEnd = "dead letter", "-"
			case h.ProcessedAt == nil:
				applied, endToEnd = "not yet", "-"
			}
			mark := ""
			if i == slowest {
				mark = "  ◀ slowest"
			}
			row(w, h.CommittedAt.UTC().Format(traceTime), h.EventType+" v"+strconv.FormatInt(h.AggregateVersion, 10),
				h.Source+" → "+sub, published, applied, endToEnd, h.EventID+mark)
		}
		w.Flush()
		fmt.Fprintln(c.out)
	} else {
		fmt.Fprintln(c.out, "no events")
	}
	for _, p := range tr.Problems {
		fmt.Fprintf(c.out, "problem: %s\n", p)
	}
	c.printGaps(tr.Gaps)
}

// latency is a hop's latency, or none when it is unknown.
func latency(d *time.Duration, none string) string {
	if d == nil {
		return none
	}
	return human(*d)
}
