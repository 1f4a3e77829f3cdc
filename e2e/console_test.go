package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/internal/browsertest"
	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/topology"
)

// The console in a real headless Chromium on the whole stack (services/console has its own
// browser tests against recorded fakes; this one has the real services behind it): the operator
// signs in, finds the dead-lettered event on the failed-messages page, replays it with a reason
// (an empty one is refused), and reads the order's trace hop by hop.
func TestOperatorReplaysADeadLetterInTheConsole(t *testing.T) {
	bctx := browsertest.Start(t) // skips the test where no browser is installed
	s := harness.Start(t, harness.Options{Env: map[string][]string{"fulfillment": {"EVENTS_EARLY_PATIENCE=2s"}}})
	ctx := context.Background()
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

	// Without a session the console shows its sign-in page and nothing else.
	if r, err := s.Do(ctx, http.MethodGet, topology.Console, "/failed", nil); err != nil || r.Status != http.StatusUnauthorized {
		t.Errorf("GET /failed without signing in: %v %v, want 401", r, err)
	}

	token, err := s.OperatorToken(ctx, topology.Console)
	if err != nil {
		t.Fatal(err)
	}
	console := s.URL(topology.Console)
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}

	run("sign in", chromedp.Navigate(console+"/login?token="+url.QueryEscape(token)), chromedp.WaitVisible(chromedp.CSS("body")))
	run("the failed messages", chromedp.Navigate(console+"/failed"), chromedp.WaitVisible(chromedp.CSS(`form[data-replay="one"]`)))
	if page := text(`document.body.innerText`); !strings.Contains(page, poison.ID) || !strings.Contains(page, "early") {
		t.Fatalf("the failed-messages page does not show the dead letter and why:\n%s", page)
	}
	form := `form[data-replay="one"]:has(input[name="target"][value*="` + poison.ID + `"])`
	// An empty reason is refused on the page, and nothing is replayed.
	run("replay without a reason", chromedp.Click(chromedp.CSS(form+` button`)))
	if msg := text(`document.querySelector('` + form + ` .form-error').innerText`); msg == "" {
		t.Error("an empty reason is not refused visibly")
	}
	run("replay with a reason",
		chromedp.SendKeys(chromedp.CSS(form+` input[name="reason"]`), "order.created has arrived"),
		chromedp.Click(chromedp.CSS(form+` button`)),
		chromedp.WaitVisible(chromedp.CSS(`#results`)))
	if ok := text(`document.querySelector('#results tr[data-event="` + poison.ID + `"]').dataset.ok`); ok != "true" {
		t.Fatalf("the replay's result: %s", text(`document.body.innerText`))
	}
	waitStatus(t, s, id, "CANCELLED customer_request")
	waitSettled(t, s)
	rows := query(t, s, "fulfillment", "SELECT ReplayReason, ReplayedBy FROM DeadLetters WHERE EventId = @id", map[string]any{"id": poison.ID})
	if want := harness.Operator + " via " + localcloud.Account(topology.Console); len(rows) != 1 || rows[0][0] != "order.created has arrived" || rows[0][1] != want {
		t.Errorf("the replay recorded %v, want the reason and %q", rows, want)
	}

	// The order's trace: every event of its aggregates, each hop with its subscriber and latency.
	run("the order's trace", chromedp.Navigate(console+"/orders/"+id), chromedp.WaitVisible(chromedp.CSS(`tr.hop`)))
	if st := text(`document.querySelector('#order-status').innerText`); st != "CANCELLED" {
		t.Errorf("the trace shows the order %s, want CANCELLED", st)
	}
	hops := text(`Array.from(document.querySelectorAll('tr.hop')).map(r => r.dataset.subscriber + ' ' + r.innerText).join('\n')`)
	for _, want := range []string{"order.created", "order.cancelled", "inventory.reserved", "inventory.released", "fulfillment", "notifications", "gateway-abstraction"} {
		if !strings.Contains(hops, want) {
			t.Errorf("the trace lacks %s:\n%s", want, hops)
		}
	}
	if text(`document.querySelector('#slowest') ? 'yes' : ''`) == "" {
		t.Errorf("the trace marks no slowest hop:\n%s", hops)
	}
}
