package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/spanmart/spanmart/internal/adminclient"
)

// outbox quarantined: the relay's quarantined events. Exit 0 whatever the list holds.
func parseQuarantined(args []string) (command, error) {
	return report(args, "outbox quarantined", (*adminclient.Client).Quarantined, (*cli).printQuarantined,
		func([]adminclient.QuarantinedEvent) int { return exitOK })
}

func (c *cli) printQuarantined(evs []adminclient.QuarantinedEvent) {
	if len(evs) == 0 {
		fmt.Fprintln(c.out, "no quarantined events")
		return
	}
	w := table(c.out)
	row(w, "SOURCE", "EVENT ID", "TYPE", "AGGREGATE", "ATTEMPTS", "COMMITTED", "LAST ERROR")
	for _, e := range evs {
		row(w, e.Source, e.EventID, e.Type, e.AggregateType+" "+e.AggregateID+" v"+strconv.FormatInt(e.AggregateVersion, 10),
			strconv.FormatInt(e.Attempts, 10), stamp(&e.CommittedAt), clip(e.LastError, 60))
	}
	w.Flush()
}

// outbox replay SOURCE EVENT_ID -reason TEXT. Exit 4 for an unknown source or event.
func parseOutboxReplay(args []string) (command, error) {
	fs := flag.NewFlagSet("outbox replay", flag.ContinueOnError)
	reason := fs.String("reason", "", "why the replay is safe now (required; recorded on the event)")
	pos, err := parseArgs(fs, args, "SOURCE", "EVENT_ID")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(*reason) == "" {
		return nil, usageErrorf("outbox replay: -reason is required: say why the replay is safe now (it is recorded)")
	}
	return func(ctx context.Context, c *cli) int {
		r, err := c.client.ReplayOutboxEvent(ctx, pos[0], pos[1], *reason)
		if err != nil {
			return c.failed(err)
		}
		if c.json {
			c.printJSON(r)
			return exitOK
		}
		fmt.Fprintf(c.out, "%s %s: %s (pending again: the relay publishes it on its next pass)\n", r.Source, r.EventID, r.Status)
		return exitOK
	}, nil
}
