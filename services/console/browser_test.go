package main

import (
	"context"
	"encoding/json"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/spanmart/spanmart/emulator/authemu"
	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/adminclient/adminclienttest"
	"github.com/spanmart/spanmart/internal/browsertest"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/console/internal/auth"
	"github.com/spanmart/spanmart/services/console/internal/consoletest"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "write the browser tests' full-page screenshots to docs/screenshots/")

// screenshotDir is docs/screenshots at the repository's root, from this package's directory.
const screenshotDir = "../../docs/screenshots"

// stack is the console (started by run, as main does, in this process) in front of the fake
// services, and the issuer that signs both the operator's token and, as the metadata server, the
// console's own.
type stack struct {
	url    string
	issuer *consoletest.Issuer
	fakes  *adminclienttest.Stack
	sc     *consoletest.Scenario
}

func startStack(t *testing.T) *stack {
	t.Helper()
	return startStackWith(t, func(map[string]string) {})
}

// startStackWith starts the stack with the console's environment changed by edit.
func startStackWith(t *testing.T, edit func(env map[string]string)) *stack {
	t.Helper()
	s := &stack{issuer: consoletest.NewIssuer(t), fakes: adminclienttest.Start(t)}
	s.sc = consoletest.Install(s.fakes, time.Now())
	// The console asks the metadata server for its tokens, as on Cloud Run: here the issuer.
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(s.issuer.URL, "http://"))
	ln := platformtest.Listen(t)
	s.url = "http://" + ln.Addr().String()
	env := map[string]string{
		"OIDC_ISSUER":            s.issuer.URL,
		"OIDC_AUDIENCE":          s.url,
		"CONSOLE_ALLOWED_EMAILS": consoletest.Operator,
		"SERVICE_ACCOUNT":        consoletest.ConsoleAccount,
		"CONSOLE_REFRESH":        "1s",
		"RELAY_URL":              s.fakes.URL(topology.Relay),
	}
	for _, c := range topology.Consumers() {
		env[c.URLVar] = s.fakes.URL(c.Name)
	}
	edit(env)
	cfg, err := loadConfig(platformtest.Getenv(env))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	log, _ := platformtest.NewLogger(t, serviceName)
	platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	platformtest.WaitStatus(t, s.url+"/healthz", 200)
	return s
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// screenshot takes a full-page screenshot, written to docs/screenshots/<name>.png with
// -update-screenshots.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(png) == 0 {
		t.Fatalf("empty screenshot of %s", name)
	}
	if !*updateScreenshots {
		return
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkReplay checks that the fake received exactly one replay at path, with reason, naming the
// operator, and carrying the console's own ID token for the fake's URL.
func (s *stack) checkReplay(t *testing.T, service, path, reason string) {
	t.Helper()
	posts := s.fakes.Posts(service, path)
	if len(posts) != 1 {
		t.Fatalf("%s got %d POST %s, want 1", service, len(posts), path)
	}
	r := posts[0]
	var body struct{ Reason string }
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil || body.Reason != reason {
		t.Errorf("%s: body %s, want the reason %q", path, r.Body, reason)
	}
	if got := r.Header.Get(adminclient.HeaderOnBehalfOf); got != consoletest.Operator {
		t.Errorf("%s: %s = %q, want %s", path, adminclient.HeaderOnBehalfOf, got, consoletest.Operator)
	}
	claims, err := s.issuer.Verify(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), s.fakes.URL(service))
	if err != nil || claims.Email != consoletest.ConsoleAccount {
		t.Errorf("%s: the bearer is not the console's token for %s: %+v, %v", path, s.fakes.URL(service), claims, err)
	}
}

// TestBrowser clicks through the console in a real headless Chromium: the sign-in page, signing
// in, the overview and its live refresh, the failed messages (a blank reason refused, one dead
// letter replayed, a group replayed), an order's trace and the stuck orders.
func TestBrowser(t *testing.T) {
	s := startStack(t)
	ctx := browsertest.Start(t) // skips the test where no browser is installed

	t.Run("sign in", func(t *testing.T) {
		do(t, ctx, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.ID("refusal")))
		if got := eval[string](t, ctx, `document.querySelector("h1").textContent`); got != "401 Unauthorized" {
			t.Errorf("without a session: %q, want 401 Unauthorized", got)
		}
		screenshot(t, ctx, "signin")
		tok := s.issuer.Token(t, s.url, consoletest.Operator)
		do(t, ctx, chromedp.Navigate(s.url+"/login?token="+url.QueryEscape(tok)), chromedp.WaitVisible(chromedp.ID("sources")))
		if got := eval[string](t, ctx, `document.getElementById("operator").textContent`); got != consoletest.Operator {
			t.Errorf("signed in as %q, want %s", got, consoletest.Operator)
		}
		if got := eval[string](t, ctx, `location.pathname`); got != "/" {
			t.Errorf("after /login the browser is at %s, want /", got)
		}
		// The session cookie is HttpOnly: the page's scripts cannot read it.
		if got := eval[string](t, ctx, `document.cookie`); got != "" {
			t.Errorf("document.cookie = %q, want nothing readable", got)
		}
	})

	t.Run("overview", func(t *testing.T) {
		do(t, ctx, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.ID("consumers")))
		rows := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#sources tbody tr")).map(r => r.dataset.source + ":" + r.cells[5].textContent.trim())`)
		if strings.Join(rows, ",") != "orders:1,fulfillment:0,gateway-abstraction:0,notifications:0" {
			t.Errorf("sources (quarantined) = %v", rows)
		}
		if lag := eval[string](t, ctx, `document.querySelector("#sources tbody tr").cells[3].textContent.trim() + "/" + document.querySelector("#sources tbody tr").cells[4].textContent.trim()`); lag != "18ms/90ms" {
			t.Errorf("publish lag p50/p99 = %q, want 18ms/90ms", lag)
		}
		holders := eval[string](t, ctx, `document.querySelector("#sources tbody tr").cells[6].textContent`)
		if !strings.Contains(holders, consoletest.RelayOwner+": 16 shards") {
			t.Errorf("lease holders = %q", holders)
		}
		consumers := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#consumers tbody tr")).map(r => Array.from(r.cells).slice(0, 7).map(c => c.textContent.trim()).join("|"))`)
		want := []string{
			"orders|41ms|220ms|412|0|0|3",
			"fulfillment|35ms|180ms|230|2|1|0",
			"gateway-abstraction|52ms|410ms|188|0|0|1",
			"notifications|61ms|2.45s|305|1|0|0",
		}
		if strings.Join(consumers, "\n") != strings.Join(want, "\n") {
			t.Errorf("consumers =\n%s\nwant\n%s", strings.Join(consumers, "\n"), strings.Join(want, "\n"))
		}
		// The tables are refetched from /api/overview every CONSOLE_REFRESH (1 s) with the session.
		before := len(s.fakes.Requests(topology.Relay))
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("refresh-status").textContent.startsWith("updated")`)); err != nil {
			t.Fatalf("the overview did not refresh: %v", err)
		}
		if after := len(s.fakes.Requests(topology.Relay)); after <= before {
			t.Errorf("the refresh did not read the relay again (%d requests before, %d after)", before, after)
		}
		screenshot(t, ctx, "overview")
	})

	t.Run("failed messages", func(t *testing.T) {
		row := `tr[data-event="` + consoletest.StockDeadLetter1 + `"]`
		do(t, ctx, chromedp.Navigate(s.url+"/failed"), chromedp.WaitVisible(chromedp.CSS(row)))
		if n := eval[int](t, ctx, `document.querySelectorAll("section.group").length`); n != 3 {
			t.Errorf("%d groups, want 3", n)
		}
		if got := eval[string](t, ctx, `document.querySelector("section.group .error-key").textContent`); got != `reserve order <id>: sku "TEE-M" unknown to inventory (catalog version <n>)` {
			t.Errorf("the first group is %q", got)
		}

		// A blank reason is refused on the page: nothing is sent.
		do(t, ctx, chromedp.SendKeys(chromedp.CSS(row+` input[name=reason]`), "   "), chromedp.Click(chromedp.CSS(row+` button`)))
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('`+row+` .form-error').textContent.includes("A reason is required")`)); err != nil {
			t.Fatalf("no visible message for a blank reason: %v", err)
		}
		if got := eval[string](t, ctx, `location.pathname`); got != "/failed" {
			t.Errorf("a blank reason left the page for %s", got)
		}
		if posts := s.fakes.Posts(topology.Fulfillment, "/admin/deadletters/"+consoletest.StockDeadLetter1+"/replay"); len(posts) != 0 {
			t.Fatalf("a blank reason was sent: %+v", posts)
		}
		screenshot(t, ctx, "failed")

		// One dead letter, with a reason.
		const reason = "TEE-M added to the catalog (#128)"
		do(t, ctx,
			chromedp.Clear(chromedp.CSS(row+` input[name=reason]`)),
			chromedp.SendKeys(chromedp.CSS(row+` input[name=reason]`), reason),
			chromedp.Click(chromedp.CSS(row+` button`)),
			chromedp.WaitVisible(chromedp.ID("results")))
		results := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#results tbody tr")).map(r => r.dataset.event + ":" + r.dataset.ok + ":" + r.cells[2].textContent.trim())`)
		if strings.Join(results, ",") != consoletest.StockDeadLetter1+":true:applied" {
			t.Errorf("results = %v", results)
		}
		if got := eval[string](t, ctx, `document.getElementById("reason").textContent`); got != reason {
			t.Errorf("the result page shows the reason %q", got)
		}
		s.checkReplay(t, topology.Fulfillment, "/admin/deadletters/"+consoletest.StockDeadLetter1+"/replay", reason)

		// The quarantined outbox event's group (one event), replayed by the relay.
		do(t, ctx, chromedp.Navigate(s.url+"/failed"), chromedp.WaitVisible(chromedp.CSS(row)))
		group := `section.group:has(tr[data-event="` + consoletest.QuarantinedID + `"]) form[data-replay=group]`
		do(t, ctx,
			chromedp.SendKeys(chromedp.CSS(group+` input[name=reason]`), "task size limit raised"),
			chromedp.Click(chromedp.CSS(group+` button`)),
			chromedp.WaitVisible(chromedp.ID("results")))
		s.checkReplay(t, topology.Relay, "/v1/outbox/orders/events/"+consoletest.QuarantinedID+"/replay", "task size limit raised")

		// The biggest group: fulfillment's two dead letters of one cause, in one go.
		do(t, ctx, chromedp.Navigate(s.url+"/failed"), chromedp.WaitVisible(chromedp.CSS(row)))
		group = `section.group[data-group="0"] form[data-replay=group]`
		do(t, ctx,
			chromedp.SendKeys(chromedp.CSS(group+` input[name=reason]`), "catalog fixed for both"),
			chromedp.Click(chromedp.CSS(group+` button`)),
			chromedp.WaitVisible(chromedp.ID("results")))
		results = eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#results tbody tr")).map(r => r.dataset.event + ":" + r.dataset.ok)`)
		if strings.Join(results, ",") != consoletest.StockDeadLetter2+":true,"+consoletest.StockDeadLetter1+":true" {
			t.Errorf("group results = %v", results)
		}
		if posts := s.fakes.Posts(topology.Fulfillment, "/admin/deadletters/"+consoletest.StockDeadLetter2+"/replay"); len(posts) != 1 {
			t.Errorf("the group's second dead letter got %d replays, want 1", len(posts))
		}
		screenshot(t, ctx, "replayed")
	})

	t.Run("order trace", func(t *testing.T) {
		do(t, ctx, chromedp.Navigate(s.url+"/orders"), chromedp.WaitVisible(chromedp.ID("customer-note")),
			chromedp.SendKeys(chromedp.CSS(`input[name=q]`), consoletest.OrderID+"\n"),
			chromedp.WaitVisible(chromedp.ID("timeline")))
		if got := eval[string](t, ctx, `location.pathname`); got != "/orders/"+consoletest.OrderID {
			t.Errorf("the search went to %s", got)
		}
		if got := eval[string](t, ctx, `document.getElementById("order-status").textContent`); got != "COMPLETED" {
			t.Errorf("status %q", got)
		}
		// Every hop, with every latency known.
		hops := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#timeline tr.hop")).map(r => r.dataset.event + ">" + r.dataset.subscriber)`)
		var want []string
		for _, ev := range s.sc.Events {
			for _, sub := range ev.Subscribers {
				want = append(want, ev.EventID+">"+sub)
			}
		}
		if strings.Join(hops, "\n") != strings.Join(want, "\n") {
			t.Errorf("hops =\n%s\nwant\n%s", strings.Join(hops, "\n"), strings.Join(want, "\n"))
		}
		if unknown := eval[int](t, ctx, `Array.from(document.querySelectorAll("#timeline td.num")).filter(c => c.textContent.trim() === "—").length`); unknown != 0 {
			t.Errorf("%d latencies unknown, want none", unknown)
		}
		slow := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#timeline tr.slowest")).map(r => r.dataset.event + ">" + r.dataset.subscriber + ">" + r.querySelector(".hop-slowest").textContent)`)
		if strings.Join(slow, ",") != s.sc.SlowestEvent+">"+s.sc.SlowestSubscriber+">2.40s" {
			t.Errorf("slowest = %v, want %s to %s, 2.40s", slow, s.sc.SlowestEvent, s.sc.SlowestSubscriber)
		}
		if got := eval[string](t, ctx, `document.getElementById("slowest").textContent`); !strings.Contains(got, "order.shipped") || !strings.Contains(got, "published → processed") {
			t.Errorf("slowest hop summary %q", got)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll("#emails tbody tr").length`); n != 2 {
			t.Errorf("%d e-mails, want 2", n)
		}
		if got := eval[string](t, ctx, `document.getElementById("payments").textContent`); !strings.Contains(got, "CAPTURED") || !strings.Contains(got, consoletest.PaymentID) {
			t.Errorf("payment box %q", got)
		}
		screenshot(t, ctx, "order")
	})

	t.Run("stuck orders", func(t *testing.T) {
		do(t, ctx, chromedp.Navigate(s.url+"/stuck"), chromedp.WaitVisible(chromedp.ID("stuck-orders")))
		stuck := eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#stuck-orders tbody tr")).map(r => r.dataset.order + ":" + r.querySelector("a").getAttribute("href"))`)
		want := []string{consoletest.StuckOrderID + ":/orders/" + consoletest.StuckOrderID, consoletest.CancellingID + ":/orders/" + consoletest.CancellingID}
		if strings.Join(stuck, ",") != strings.Join(want, ",") {
			t.Errorf("stuck orders = %v, want %v", stuck, want)
		}
		for _, id := range []string{"mismatches", "flagged"} {
			if n := eval[int](t, ctx, `document.querySelectorAll("#`+id+` tbody tr[data-order]").length`); n != 1 {
				t.Errorf("%s: %d rows, want 1", id, n)
			}
		}
		screenshot(t, ctx, "stuck")
		// Each order links to its trace.
		do(t, ctx, chromedp.Click(chromedp.CSS(`#stuck-orders a[href="/orders/`+consoletest.StuckOrderID+`"]`)), chromedp.WaitVisible(chromedp.ID("timeline")))
		if got := eval[string](t, ctx, `document.querySelector("h1").textContent`); !strings.Contains(got, consoletest.StuckOrderID) || !strings.Contains(got, "AWAITING_PAYMENT") {
			t.Errorf("the stuck order's trace: %q", got)
		}
	})
}

// TestBrowserBehindIAP signs in through Identity-Aware Proxy in a real headless Chromium: the
// console configured as in production behind IAP (CONSOLE_IAP_AUDIENCE; IAP's issuer and key set
// those of the local identity emulator), the browser's every request carrying the emulator's
// assertion of the operator as IAP adds it. Without it the console refuses the page (401, saying
// the console is reached through IAP); with it the overview names the operator, a dead letter is
// replayed on the operator's behalf (the form's CSRF token keyed with the console's cookie), and
// the sign-out hands over to IAP's.
func TestBrowserBehindIAP(t *testing.T) {
	iap := consoletest.StartIAP(t)
	s := startStackWith(t, func(env map[string]string) {
		delete(env, "OIDC_ISSUER")
		delete(env, "OIDC_AUDIENCE")
		env["CONSOLE_IAP_AUDIENCE"] = iap.IAPAudience()
		env["CONSOLE_IAP_ISSUER"] = iap.IAPIssuer()
		env["CONSOLE_IAP_JWKS_URL"] = iap.IAPJWKSURL()
	})
	ctx := browsertest.Start(t) // skips the test where no browser is installed

	do(t, ctx, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.ID("refusal")))
	if got := eval[string](t, ctx, `document.querySelector("h1").textContent`); got != "401 Unauthorized" {
		t.Errorf("around the proxy: %q, want 401 Unauthorized", got)
	}
	if got := eval[string](t, ctx, `document.querySelector("main").textContent`); !strings.Contains(got, "Identity-Aware Proxy") || strings.Contains(got, "/login?token=") {
		t.Errorf("the refusal around the proxy says %q: want IAP named and no ID-token sign-in", got)
	}

	// From here on, the browser's requests (the pages, the forms, the overview's refresh) carry
	// IAP's assertion of the operator, as IAP adds it to every request it lets through.
	assertion := consoletest.Assertion(t, iap, authemu.IAPClaims{Email: consoletest.Operator})
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{auth.HeaderIAPAssertion: assertion},
	}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.ID("sources")))
	if got := eval[string](t, ctx, `document.getElementById("operator").textContent`); got != consoletest.Operator {
		t.Errorf("signed in through IAP as %q, want %s", got, consoletest.Operator)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("refresh-status").textContent.startsWith("updated")`)); err != nil {
		t.Fatalf("the overview did not refresh through IAP: %v", err)
	}
	if got := eval[string](t, ctx, `document.cookie`); got != "" {
		t.Errorf("document.cookie = %q, want nothing readable (the CSRF cookie is HttpOnly)", got)
	}

	row := `tr[data-event="` + consoletest.StockDeadLetter1 + `"]`
	const reason = "TEE-M added to the catalog (#128), through IAP"
	do(t, ctx, chromedp.Navigate(s.url+"/failed"), chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.SendKeys(chromedp.CSS(row+` input[name=reason]`), reason),
		chromedp.Click(chromedp.CSS(row+` button`)),
		chromedp.WaitVisible(chromedp.ID("results")))
	s.checkReplay(t, topology.Fulfillment, "/admin/deadletters/"+consoletest.StockDeadLetter1+"/replay", reason)

	do(t, ctx, chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)), chromedp.WaitVisible(chromedp.ID("sources")))
	if got := eval[string](t, ctx, `location.pathname + location.search`); got != auth.IAPSignOut {
		t.Errorf("the sign-out went to %s, want IAP's %s", got, auth.IAPSignOut)
	}
}
