package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spanmart/spanmart/internal/adminclient"
)

// Exit codes (README.md says which each command returns when).
const (
	exitOK       = 0 // done, nothing wrong found
	exitProblem  = 1 // the command ran and found a problem, or a service refused the action (409, 422)
	exitUsage    = 2 // the command line is wrong (or a service said the request is: 400)
	exitRefused  = 3 // 401 or 403: the token or the account
	exitNotFound = 4 // 404, or nothing matched
	exitFailure  = 5 // a service unreachable, or any other failure
)

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

func usageFailed(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "spanmartctl: %v\n", err)
	return exitUsage
}

// exitCode classifies err.
func exitCode(err error) int {
	var (
		ue *usageError
		ae *adminclient.Error
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue), errors.Is(err, adminclient.ErrNoReason), errors.Is(err, adminclient.ErrUnknownService),
		errors.Is(err, adminclient.ErrNoURL):
		return exitUsage
	case errors.Is(err, adminclient.ErrUnauthenticated), errors.Is(err, adminclient.ErrForbidden):
		return exitRefused
	case errors.Is(err, adminclient.ErrNotFound):
		return exitNotFound
	case errors.Is(err, adminclient.ErrConflict):
		return exitProblem
	case errors.As(err, &ae) && ae.StatusCode == http.StatusUnprocessableEntity:
		return exitProblem
	case errors.As(err, &ae) && ae.StatusCode == http.StatusBadRequest:
		return exitUsage
	}
	return exitFailure
}

// failed reports err and returns its exit code.
func (c *cli) failed(err error) int {
	fmt.Fprintf(c.errOut, "spanmartctl: %v\n", err)
	code := exitCode(err)
	if code == exitRefused {
		fmt.Fprintln(c.errOut, refusedHint)
	}
	return code
}

// refusedHint follows a 401 or 403.
const refusedHint = "spanmartctl: the token must be for the service's URL and of an account in its ADMIN_ALLOWED_EMAILS (see -as, $SPANMART_TOKEN)"

// gapsCode is the exit code of an assembled answer with gaps: exitRefused when a service refused,
// else exitFailure when one did not answer (down, or without a URL), else exitNotFound when one
// does not know what was asked (404); exitOK without gaps.
func gapsCode(gaps []adminclient.Gap) int {
	codes := []int{exitOK}
	for _, g := range gaps {
		switch {
		case g.Refused():
			codes = append(codes, exitRefused)
		case errors.Is(g.Err, adminclient.ErrNotFound):
			codes = append(codes, exitNotFound)
		default:
			codes = append(codes, exitFailure)
		}
	}
	return worst(codes...)
}

// worst combines exit codes of one command: refused, then failure, then not found, then problem.
func worst(codes ...int) int {
	for _, want := range []int{exitRefused, exitFailure, exitNotFound, exitProblem} {
		for _, c := range codes {
			if c == want {
				return want
			}
		}
	}
	return exitOK
}

// printJSON writes v indented.
func (c *cli) printJSON(v any) {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(c.errOut, "spanmartctl: %v\n", err)
	}
}

// table returns a tab-separated table writer on out; Flush it.
func table(out io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
}

// row writes cells separated by tabs.
func row(w io.Writer, cells ...string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// human is a duration for people: 48ms, 3.04s, 7m1s.
func human(d time.Duration) string {
	abs := d
	if abs < 0 {
		abs = -abs
	}
	switch {
	case abs < time.Second:
		return d.Round(time.Millisecond).String()
	case abs < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

func humanSeconds(s float64) string { return human(time.Duration(s * float64(time.Second))) }

// stamp is a time in UTC to the second (RFC 3339), "-" for none.
func stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// clip shortens s to n runes for a table cell, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// printGaps lists what could not be read.
func (c *cli) printGaps(gaps []adminclient.Gap) {
	for _, g := range gaps {
		fmt.Fprintf(c.out, "incomplete: %s: %s: %s\n", g.Service, g.What, g.Error)
	}
}
