package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/topology"
)

// deadletters list: every consumer's (or one's) dead letters. Exit 0 whatever the list holds;
// the exit code of the first consumer that did not answer otherwise (the others are listed).
func parseDeadLetterList(args []string) (command, error) {
	fs := flag.NewFlagSet("deadletters list", flag.ContinueOnError)
	consumer := fs.String("consumer", "", "only this consumer's (default: every consumer's)")
	all := fs.Bool("all", false, "the replayed ones too")
	if _, err := parseArgs(fs, args); err != nil {
		return nil, err
	}
	return func(ctx context.Context, c *cli) int {
		consumers := consumerNames()
		if *consumer != "" {
			consumers = []string{*consumer}
		}
		lists := map[string][]adminclient.DeadLetter{}
		var firstErr error
		for _, name := range consumers {
			list, err := c.client.DeadLetters(ctx, name, adminclient.DeadLetterQuery{All: *all})
			if err != nil {
				fmt.Fprintf(c.errOut, "spanmartctl: %v\n", err)
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			lists[name] = list
		}
		if c.json {
			c.printJSON(lists)
		} else {
			c.printDeadLetters(consumers, lists, *all)
		}
		if firstErr != nil {
			if exitCode(firstErr) == exitRefused {
				fmt.Fprintln(c.errOut, refusedHint)
			}
			return exitCode(firstErr)
		}
		return exitOK
	}, nil
}

func (c *cli) printDeadLetters(consumers []string, lists map[string][]adminclient.DeadLetter, all bool) {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if n == 0 {
		if len(lists) > 0 {
			fmt.Fprintln(c.out, "no dead letters")
		}
		return
	}
	w := table(c.out)
	head := []string{"CONSUMER", "EVENT ID", "TYPE", "ATTEMPTS", "DEAD AT", "LAST ERROR"}
	if all {
		head = append(head, "REPLAYED")
	}
	row(w, head...)
	for _, name := range consumers {
		for _, d := range lists[name] {
			cells := []string{name, d.EventID, d.EventType, strconv.FormatInt(d.Attempts, 10), stamp(&d.DeadAt), clip(d.LastError, 60)}
			if all {
				replayed := "-"
				if d.Replayed() {
					replayed = stamp(d.ReplayedAt) + " by " + d.ReplayedBy
				}
				cells = append(cells, replayed)
			}
			row(w, cells...)
		}
	}
	w.Flush()
}

// deadletters show CONSUMER EVENT_ID. Exit 4 when the consumer has no dead letter of the event.
func parseDeadLetterShow(args []string) (command, error) {
	fs := flag.NewFlagSet("deadletters show", flag.ContinueOnError)
	pos, err := parseArgs(fs, args, "CONSUMER", "EVENT_ID")
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, c *cli) int {
		d, err := c.client.DeadLetter(ctx, pos[0], pos[1])
		if err != nil {
			return c.failed(err)
		}
		if c.json {
			c.printJSON(d)
			return exitOK
		}
		c.printDeadLetter(pos[0], d)
		return exitOK
	}, nil
}

func (c *cli) printDeadLetter(consumer string, d adminclient.DeadLetter) {
	w := table(c.out)
	row(w, "consumer:", consumer)
	row(w, "event:", d.EventID)
	row(w, "type:", d.EventType)
	row(w, "source:", d.Source)
	row(w, "attempts:", strconv.FormatInt(d.Attempts, 10))
	row(w, "dead at:", stamp(&d.DeadAt))
	row(w, "last error:", d.LastError)
	if d.Replayed() {
		row(w, "replayed:", stamp(d.ReplayedAt)+" by "+d.ReplayedBy)
		row(w, "reason:", d.ReplayReason)
	} else {
		row(w, "replayed:", "no")
	}
	w.Flush()
	fmt.Fprintln(c.out, "attributes:")
	keys := make([]string, 0, len(d.Attributes))
	for k := range d.Attributes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w = table(c.out)
	for _, k := range keys {
		row(w, "  "+k+":", d.Attributes[k])
	}
	w.Flush()
	fmt.Fprintln(c.out, "payload:")
	switch {
	case len(d.Body) > 0:
		var buf bytes.Buffer
		if json.Indent(&buf, d.Body, "  ", "  ") != nil {
			buf.Reset()
			buf.Write(d.Body)
		}
		fmt.Fprintf(c.out, "  %s\n", buf.String())
	case len(d.BodyBytes) > 0:
		fmt.Fprintf(c.out, "  (not JSON, %d bytes, base64) %s\n", len(d.BodyBytes), base64.StdEncoding.EncodeToString(d.BodyBytes))
	default:
		fmt.Fprintln(c.out, "  (empty)")
	}
}

// groupResult is one replay of deadletters replay -group.
type groupResult struct {
	adminclient.DeadLetterReplay
	LastError string `json:"last_error"`
	Error     string `json:"error,omitempty"`
}

// deadletters replay CONSUMER EVENT_ID -reason TEXT, or CONSUMER -group TEXT -reason TEXT.
// One: the exit code of the replay (0, or 4 unknown, 1 refused by the consumer: already replayed,
// still early, no handler, refused for good). A group: 4 when no unreplayed dead letter matches;
// each is replayed in turn (the list's order, newest first) and the exit code is the first failed
// one's (0 when all were replayed); a 401 or 403 stops the group.
func parseDeadLetterReplay(args []string) (command, error) {
	fs := flag.NewFlagSet("deadletters replay", flag.ContinueOnError)
	reason := fs.String("reason", "", "why the replay is safe now (required; recorded with your account)")
	group := fs.String("group", "", "replay every unreplayed dead letter whose last error contains this text")
	pos, err := parseAnywhere(fs, args)
	if err != nil {
		return nil, err
	}
	grouped := false
	fs.Visit(func(f *flag.Flag) { grouped = grouped || f.Name == "group" })
	want := []string{"CONSUMER", "EVENT_ID"}
	if grouped {
		want = want[:1]
	}
	if err := checkArgs(fs, pos, want...); err != nil {
		return nil, err
	}
	if strings.TrimSpace(*reason) == "" {
		return nil, usageErrorf("deadletters replay: -reason is required: say why the replay is safe now (it is recorded)")
	}
	if grouped && strings.TrimSpace(*group) == "" {
		return nil, usageErrorf("deadletters replay: -group needs the text of the last errors to match")
	}
	consumer := pos[0]
	if !grouped {
		id := pos[1]
		return func(ctx context.Context, c *cli) int {
			r, err := c.client.ReplayDeadLetter(ctx, consumer, id, *reason)
			if err != nil {
				return c.failed(err)
			}
			if c.json {
				c.printJSON(r)
			} else {
				fmt.Fprintf(c.out, "%s %s: %s\n", consumer, id, r.Outcome)
			}
			return exitOK
		}, nil
	}
	return func(ctx context.Context, c *cli) int {
		list, err := c.client.DeadLetters(ctx, consumer, adminclient.DeadLetterQuery{})
		if err != nil {
			return c.failed(err)
		}
		var results []groupResult
		code := exitOK
		for _, d := range list {
			if !strings.Contains(d.LastError, *group) {
				continue
			}
			r, err := c.client.ReplayDeadLetter(ctx, consumer, d.EventID, *reason)
			res := groupResult{DeadLetterReplay: adminclient.DeadLetterReplay{Consumer: consumer, EventID: d.EventID, Outcome: r.Outcome}, LastError: d.LastError}
			if err != nil {
				res.Error = err.Error()
				if code == exitOK {
					code = exitCode(err)
				}
			}
			results = append(results, res)
			if exitCode(err) == exitRefused {
				break
			}
		}
		if len(results) == 0 {
			fmt.Fprintf(c.errOut, "spanmartctl: %s has no unreplayed dead letter whose last error contains %q\n", consumer, *group)
			if c.json {
				c.printJSON([]groupResult{})
			}
			return exitNotFound
		}
		if c.json {
			c.printJSON(results)
		} else {
			w := table(c.out)
			row(w, "EVENT ID", "RESULT", "LAST ERROR")
			for _, r := range results {
				result := r.Outcome
				if r.Error != "" {
					result = "failed: " + r.Error
				}
				row(w, r.EventID, result, clip(r.LastError, 60))
			}
			w.Flush()
		}
		if code == exitRefused {
			fmt.Fprintln(c.errOut, refusedHint)
		}
		return code
	}, nil
}

// consumerNames are the roster's consumers.
func consumerNames() []string {
	var out []string
	for _, s := range topology.Consumers() {
		out = append(out, s.Name)
	}
	return out
}
