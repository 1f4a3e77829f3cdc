package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/internal/localenv"
	"github.com/spanmart/spanmart/internal/topology"
)

// Operating the system (issue 13) on the whole stack: the operator finds a dead-lettered event,
// sees why, replays it with a reason with spanmartctl, and follows an order's trace hop by hop;
// calls without an operator's token are refused.

var (
	ctlOnce sync.Once
	ctlBin  string
	ctlErr  error
)

// spanmartctl builds the CLI once per test binary.
func spanmartctl(t *testing.T) string {
	t.Helper()
	ctlOnce.Do(func() {
		root, err := localenv.RepoRoot()
		if err != nil {
			ctlErr = err
			return
		}
		dir, err := os.MkdirTemp("", "spanmartctl-")
		if err != nil {
			ctlErr = err
			return
		}
		ctlErr = localenv.Build(context.Background(), root, dir, []string{"./tools/spanmartctl"}, nil)
		ctlBin = filepath.Join(dir, "spanmartctl")
	})
	if ctlErr != nil {
		t.Fatal(ctlErr)
	}
	return ctlBin
}

// ctl runs spanmartctl against the stack as the account as (the operator when ""), the way an
// operator in production would (-env prod, the services' URLs, ID tokens from the metadata
// server, here the Tasks emulator's), and returns its output and exit code.
func ctl(t *testing.T, s *harness.Stack, as string, args ...string) (string, int) {
	t.Helper()
	var urls []string
	for _, name := range topology.Names() {
		urls = append(urls, name+"="+s.URL(name))
	}
	if as == "" {
		as = harness.Operator
	}
	full := append([]string{"-env", "prod", "-urls", strings.Join(urls, ","), "-as", as}, args...)
	cmd := exec.Command(spanmartctl(t), full...)
	cmd.Env = append(os.Environ(), "GCE_METADATA_HOST="+strings.TrimPrefix(s.TasksHTTP(), "http://"), "SPANMART_TOKEN=", "SPANMART_URLS=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("spanmartctl %v: %v", args, err)
	}
	return out.String(), 0
}

func TestOperatorReplaysADeadLetterWithTheCLI(t *testing.T) {
	s := harness.Start(t, harness.Options{Env: map[string][]string{"fulfillment": {"EVENTS_EARLY_PATIENCE=2s"}}})
	ctx := context.Background()

	// Without an operator's token every operator endpoint refuses, and so does the CLI.
	for _, c := range []struct{ name, path string }{
		{"relay", "/v1/outbox"}, {"fulfillment", "/admin/deadletters"}, {"orders", "/admin/stuck-orders"},
		{"gateway-abstraction", "/admin/payments?order_id=x"}, {"notifications", "/admin/notifications?order_id=x"},
	} {
		if r, err := s.Do(ctx, http.MethodGet, c.name, c.path, nil); err != nil || r.Status != http.StatusUnauthorized {
			t.Errorf("GET %s %s without a token: %v %v, want 401", c.name, c.path, r, err)
		}
	}
	if out, code := ctl(t, s, "intruder@example.com", "deadletters", "list"); code != 3 {
		t.Errorf("spanmartctl as another account: exit %d, want 3 (refused)\n%s", code, out)
	}

	// A dead letter: an order.cancelled that reached fulfillment long before its order.created.
	id, poison := cancelBeforeReserving(t, s)
	deliver(t, s, "fulfillment", "fulfillment-inbox", poison, "", time.Time{})
	harness.Until(t, "the event is dead-lettered", func() (bool, string) {
		n, err := countErr(s, "fulfillment", "SELECT COUNT(*) FROM DeadLetters WHERE EventId = @id", map[string]any{"id": poison.ID})
		return err == nil && n == 1, fmt.Sprint(n, err)
	})
	if err := s.Start(ctx, "relay"); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, s)

	// The operator sees it, and why.
	out, code := ctl(t, s, "", "status")
	if code != 1 || !strings.Contains(out, "fulfillment") {
		t.Errorf("spanmartctl status: exit %d, want 1 (a dead letter)\n%s", code, out)
	}
	out, code = ctl(t, s, "", "-o", "json", "deadletters", "list", "-consumer", "fulfillment")
	var listed map[string][]struct { // by consumer
		EventID   string `json:"event_id"`
		LastError string `json:"last_error"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil {
		t.Fatalf("spanmartctl deadletters list: exit %d\n%s", code, out)
	}
	if dls := listed["fulfillment"]; len(dls) != 1 || dls[0].EventID != poison.ID || !strings.Contains(dls[0].LastError, "early") {
		t.Fatalf("spanmartctl deadletters list: %+v, want the poison event with why\n%s", listed, out)
	}
	if out, code := ctl(t, s, "", "deadletters", "replay", "fulfillment", poison.ID); code != 2 {
		t.Errorf("replay without a reason: exit %d, want 2\n%s", code, out)
	}
	if out, code := ctl(t, s, "", "deadletters", "replay", "fulfillment", poison.ID, "-reason", "order.created has arrived"); code != 0 {
		t.Fatalf("spanmartctl deadletters replay: exit %d\n%s", code, out)
	}
	waitStatus(t, s, id, "CANCELLED customer_request")
	waitSettled(t, s)
	rows := query(t, s, "fulfillment", "SELECT ReplayReason, ReplayedBy FROM DeadLetters WHERE EventId = @id", map[string]any{"id": poison.ID})
	if len(rows) != 1 || rows[0][0] != "order.created has arrived" || rows[0][1] != harness.Operator {
		t.Errorf("the replay recorded %v, want the reason and the operator's verified account", rows)
	}

	// The order's trace: every hop of every event, with its latency.
	out, code = ctl(t, s, "", "-o", "json", "order", "trace", id)
	var trace struct {
		Status string `json:"status"`
		Hops   []struct {
			Type       string   `json:"event_type"`
			Subscriber string   `json:"subscriber"` // "" for an event routed to nobody
			EndToEnd   *float64 `json:"committed_to_processed_seconds"`
		} `json:"hops"`
	}
	if err := json.Unmarshal([]byte(out), &trace); err != nil || trace.Status != "CANCELLED" {
		t.Fatalf("spanmartctl order trace: exit %d, %v\n%s", code, err, out)
	}
	seen := map[string]bool{}
	for _, h := range trace.Hops {
		if h.Subscriber == "" {
			continue // order.cancellation_completed: routed to nobody
		}
		seen[h.Type+" → "+h.Subscriber] = true
		if h.EndToEnd == nil || *h.EndToEnd < 0 {
			t.Errorf("hop %s → %s has no latency", h.Type, h.Subscriber)
		}
	}
	for _, want := range []string{
		"order.created → fulfillment", "order.created → notifications", "order.cancelled → fulfillment",
		"order.cancelled → gateway-abstraction", "order.cancelled → notifications", "inventory.reserved → orders",
		"inventory.released → orders",
	} {
		if !seen[want] {
			t.Errorf("the trace lacks the hop %s; it has %v", want, seen)
		}
	}
	if out, code := ctl(t, s, "", "order", "trace", id); code != 0 || !strings.Contains(out, "order.cancelled") {
		t.Errorf("spanmartctl order trace (table): exit %d\n%s", code, out)
	}
}
