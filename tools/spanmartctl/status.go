package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/spanmart/spanmart/internal/adminclient"
)

// status: every source's outbox and every consumer, then a line per problem. Exit 1 when there is
// a problem (adminclient.Overview's: quarantined events, a pending event older than
// -max-pending-age, unreplayed dead letters, failing events); 3 or 5 when a service did not
// answer.
func parseStatus(args []string) (command, error) {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	maxAge := fs.Duration("max-pending-age", adminclient.DefaultMaxPendingAge, "a pending event older than this is a problem")
	if _, err := parseArgs(fs, args); err != nil {
		return nil, err
	}
	return func(ctx context.Context, c *cli) int {
		ov := c.client.Overview(ctx, adminclient.OverviewOptions{MaxPendingAge: *maxAge})
		if c.json {
			c.printJSON(ov)
		} else {
			c.printOverview(ov)
		}
		code := exitOK
		if len(ov.Problems) > 0 {
			code = exitProblem
		}
		return worst(code, gapsCode(ov.Gaps))
	}, nil
}

func (c *cli) printOverview(ov adminclient.Overview) {
	if ov.Relay != nil {
		w := table(c.out)
		row(w, "SOURCE", "PENDING", "OLDEST", "QUARANTINED", "SHARDS LIVE")
		for _, s := range ov.Relay.Sources {
			oldest := "-"
			if s.OldestPendingAgeSeconds > 0 {
				oldest = humanSeconds(s.OldestPendingAgeSeconds)
			}
			row(w, s.Source, strconv.FormatInt(s.Pending, 10), oldest, strconv.FormatInt(s.Quarantined, 10),
				fmt.Sprintf("%d/%d", s.LiveShards(), len(s.Shards)))
		}
		w.Flush()
		fmt.Fprintln(c.out)
	}
	if len(ov.Consumers) > 0 {
		w := table(c.out)
		row(w, "CONSUMER", "DEAD LETTERS", "FAILING", "DEFERRALS", "LAG P50", "LAG P99", "APPLIED", "SINCE")
		for _, st := range ov.Consumers {
			p50, p99 := "-", "-"
			if st.Lag.Count > 0 {
				p50, p99 = humanSeconds(st.Lag.P50), humanSeconds(st.Lag.P99)
			}
			row(w, st.Consumer, strconv.FormatInt(st.DeadLetters, 10), strconv.FormatInt(st.Failing, 10), strconv.FormatInt(st.Events.Early, 10),
				p50, p99, strconv.FormatInt(st.Events.Applied, 10), stamp(&st.Since))
		}
		w.Flush()
		fmt.Fprintln(c.out)
	}
	for _, p := range ov.Problems {
		fmt.Fprintf(c.out, "problem: %s\n", p)
	}
	c.printGaps(ov.Gaps)
	if len(ov.Problems) == 0 && len(ov.Gaps) == 0 {
		fmt.Fprintln(c.out, "no problems")
	}
}
