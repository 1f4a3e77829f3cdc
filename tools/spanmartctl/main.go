// Command spanmartctl is the operators' command line for Spanmart: the state of the outboxes and of
// the consumers, the dead letters and their replays, the quarantined outbox events and theirs, an
// order's trace across the services, and orders' stuck-order detector, reconciliation and audit.
// It calls the services' operator APIs through internal/adminclient, never their databases.
//
//	spanmartctl status                                   # dev stack: 127.0.0.1:8081..8085, tokens of the local operator
//	spanmartctl deadletters list
//	spanmartctl deadletters replay fulfillment EVENT_ID -reason "SKU Z9 added to the catalog"
//	spanmartctl order trace ORDER_ID
//	spanmartctl -env prod -urls orders=https://orders-123.a.run.app,relay=https://relay-123.a.run.app stuck
//
// Exit codes: 0 ok; 1 the command ran and found a problem; 2 usage error; 3 a service refused the
// token or the account (401, 403); 4 not found; 5 a service unreachable or any other failure.
// README.md lists the commands, what each exit code means for each, and how to point it at the dev
// stack and at production.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spanmart/spanmart/internal/adminclient"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: spanmartctl [global flags] COMMAND [ARGS]

Commands:
  status [-max-pending-age 5m]                 every outbox and every consumer, and a line per problem
  deadletters list [-consumer NAME] [-all]     the consumers' dead letters (not replayed yet, unless -all)
  deadletters show CONSUMER EVENT_ID           one dead letter: payload, attempts, last error, replay
  deadletters replay CONSUMER EVENT_ID -reason TEXT
  deadletters replay CONSUMER -group TEXT -reason TEXT
                                               replay one dead letter, or every unreplayed one whose
                                               last error contains TEXT
  outbox quarantined                           the events the relay stopped retrying
  outbox replay SOURCE EVENT_ID -reason TEXT   re-queue an outbox event
  order trace ORDER_ID                         the order's events, hop by hop, with the latencies
  stuck                                        orders' stuck-order detector
  reconcile                                    orders' reconciliation with fulfillment and the gateway
  audit                                        both, as Cloud Scheduler runs them (logged, gauges set)

Exit codes: 0 ok, 1 a problem found, 2 usage, 3 refused (401/403), 4 not found, 5 unreachable or
any other failure.

Global flags:
`

// options are the global flags.
type options struct {
	env        string
	portOffset int
	as         string
	urls       string
	output     string
	timeout    time.Duration
}

// cli is what a command runs with.
type cli struct {
	client *adminclient.Client
	out    io.Writer
	errOut io.Writer
	json   bool
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("spanmartctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.env, "env", "dev", "dev (the dev stack on 127.0.0.1) or prod (-urls or $SPANMART_URLS)")
	fs.IntVar(&o.portOffset, "port-offset", 0, "dev: the dev stack's -port-offset")
	fs.StringVar(&o.as, "as", "", "the account whose ID tokens are sent: dev default "+devOperator()+" (minted by the Tasks emulator); prod default the metadata server's own account")
	fs.StringVar(&o.urls, "urls", "", "name=url,... base URLs by service (prod: default $SPANMART_URLS; dev: overrides the dev stack's)")
	fs.StringVar(&o.output, "o", "table", "output: table or json")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "bound on the whole command")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if o.output != "table" && o.output != "json" {
		return usageFailed(stderr, fmt.Errorf("-o %q: want table or json", o.output))
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	cmd, err := lookup(fs.Args())
	if err != nil {
		return usageFailed(stderr, err)
	}
	client, err := newClient(o, os.Getenv)
	if err != nil {
		return usageFailed(stderr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	c := &cli{client: client, out: stdout, errOut: stderr, json: o.output == "json"}
	return cmd(ctx, c)
}

// command is a parsed command, ready to run.
type command func(ctx context.Context, c *cli) int

// lookup parses the command and its arguments.
func lookup(args []string) (command, error) {
	name, rest := args[0], args[1:]
	sub := func() (string, []string) {
		if len(rest) == 0 {
			return "", nil
		}
		return rest[0], rest[1:]
	}
	switch name {
	case "status":
		return parseStatus(rest)
	case "deadletters":
		switch s, r := sub(); s {
		case "list":
			return parseDeadLetterList(r)
		case "show":
			return parseDeadLetterShow(r)
		case "replay":
			return parseDeadLetterReplay(r)
		default:
			return nil, usageErrorf("deadletters needs list, show or replay, got %q", s)
		}
	case "outbox":
		switch s, r := sub(); s {
		case "quarantined":
			return parseQuarantined(r)
		case "replay":
			return parseOutboxReplay(r)
		default:
			return nil, usageErrorf("outbox needs quarantined or replay, got %q", s)
		}
	case "order":
		switch s, r := sub(); s {
		case "trace":
			return parseTrace(r)
		default:
			return nil, usageErrorf("order needs trace, got %q", s)
		}
	case "stuck":
		return parseStuck(rest)
	case "reconcile":
		return parseReconcile(rest)
	case "audit":
		return parseAudit(rest)
	}
	return nil, usageErrorf("unknown command %q (run spanmartctl -h)", name)
}

// parseArgs parses fs's flags anywhere among args ("replay fulfillment ID -reason x" as well as
// "replay -reason x fulfillment ID") and returns the positional arguments, which must be as many
// as want names.
func parseArgs(fs *flag.FlagSet, args []string, want ...string) ([]string, error) {
	pos, err := parseAnywhere(fs, args)
	if err != nil {
		return nil, err
	}
	return pos, checkArgs(fs, pos, want...)
}

// parseAnywhere parses fs's flags anywhere among args and returns the positional arguments.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageErrorf("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// checkArgs says what was expected when pos are not as many as want names.
func checkArgs(fs *flag.FlagSet, pos []string, want ...string) error {
	if len(pos) == len(want) {
		return nil
	}
	shape := fs.Name()
	for _, w := range want {
		shape += " " + w
	}
	return usageErrorf("%s: got %d argument(s) %q, want %s", fs.Name(), len(pos), strings.Join(pos, " "), shape)
}
