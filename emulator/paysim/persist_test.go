package paysim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stripe/stripe-go/v82"
)

// readBack is everything a client can read of a sandbox's state, keyed by the path it was read
// from: the /_sandbox/ read-backs and both dialects' event lists.
func readBack(t *testing.T, srv *Server) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, path := range []string{"/_sandbox/payment_intents", "/_sandbox/refunds", "/_sandbox/komoju/payments", "/_sandbox/komoju/wallets"} {
		var v any
		getJSON(t, srv.URL()+path, &v)
		out[path] = v
	}
	// The Stripe dialect takes HTTP Basic with the key as user name, as the KOMOJU client sends it.
	for _, path := range []string{"/v1/events?limit=100", "/api/v1/events?per_page=100"} {
		status, raw := komojuClient{t: t, base: srv.URL(), key: testKey}.do("GET", path, nil)
		var v any
		if err := json.Unmarshal(raw, &v); status != http.StatusOK || err != nil {
			t.Fatalf("GET %s: status %d, %v", path, status, err)
		}
		out[path] = v
	}
	return out
}

// allDelivered reports whether every webhook delivery of srv so far was delivered.
func allDelivered(srv *Server) bool {
	ds := srv.Deliveries()
	return len(ds) > 0 && !slices.ContainsFunc(ds, func(d Delivery) bool { return d.State != "delivered" })
}

func TestPersistenceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	rc := newReceiver(t, testSecret)
	krc := newKomojuReceiver(t, komojuSecret)
	opts := Options{
		DataDir: dir, ClockStart: clockStart, WebhookRetry: fastRetry,
		WebhookURL: rc.URL, WebhookSecret: testSecret, KomojuWebhookURL: krc.URL, KomojuWebhookSecret: komojuSecret,
	}
	srv, c := startSandbox(t, opts)
	kc := komojuClient{t: t, base: srv.URL(), key: komojuKey}
	ctx := context.Background()

	// Stripe: an authorization made with an idempotency key, a payment partly refunded, a decline.
	authorized, err := c.V1PaymentIntents.Create(ctx, createParams("persist-authorize", 3000))
	if err != nil {
		t.Fatal(err)
	}
	paid, err := c.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(5000), Currency: stripe.String("usd"), PaymentMethod: stripe.String("pm_card_visa"), Confirm: stripe.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String(paid.ID), Amount: stripe.Int64(1200)}); err != nil {
		t.Fatal(err)
	}
	_, err = authorize(t, c, "pm_card_chargeDeclined", 700)
	declined := stripeError(t, err).PaymentIntent.ID
	// KOMOJU: a konbini slip made with an idempotency key, a bank transfer slip, a PayPay hold.
	slipKey := []string{"X-KOMOJU-IDEMPOTENCY", "persist-slip"}
	slip := kc.payment("POST", "/api/v1/payments", konbini("lawson", 1500), slipKey...)
	kc.payment("POST", "/api/v1/payments", bankTransfer(2500))
	hold := kc.payment("POST", "/api/v1/payments", payPay("ali", 4000, false))
	if hold.Status != "authorized" {
		t.Fatalf("PayPay hold: %s", hold.Status)
	}
	advance(t, srv, `{"duration":"2h"}`)
	eventually(t, "every webhook delivered", func() bool { return allDelivered(srv) })
	before := readBack(t, srv)
	clockBefore := srv.Now()
	deliveryIDs := map[string]bool{}
	for _, d := range srv.Deliveries() {
		deliveryIDs[d.ID] = true
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	// Another clock start and other wallets: a saved state keeps its own.
	opts.ClockStart, opts.WalletBalances = time.Time{}, map[string]int64{"ali": 1}
	srv, c = startSandbox(t, opts)
	kc = komojuClient{t: t, base: srv.URL(), key: komojuKey}

	if now := srv.Now(); now.Before(clockBefore) || now.After(clockBefore.Add(time.Minute)) {
		t.Errorf("clock after the restart %v, want from %v on", now, clockBefore)
	}
	if diff := cmp.Diff(before, readBack(t, srv)); diff != "" {
		t.Errorf("read-backs after the restart (-before +after):\n%s", diff)
	}
	if len(srv.Deliveries()) != 0 {
		t.Errorf("deliveries after the restart %+v, want none (all were delivered)", srv.Deliveries())
	}
	got, err := c.V1PaymentIntents.Retrieve(ctx, authorized.ID, nil)
	if err != nil || got.Status != stripe.PaymentIntentStatusRequiresCapture || got.AmountCapturable != 3000 {
		t.Fatalf("Retrieve %s = %+v, %v", authorized.ID, got, err)
	}
	got, err = c.V1PaymentIntents.Retrieve(ctx, declined, nil)
	if err != nil || got.LastPaymentError == nil || got.LastPaymentError.DeclineCode != "generic_decline" {
		t.Errorf("declined PaymentIntent after the restart: %+v, %v", got, err)
	}

	// The idempotency keys replay the first responses, and still refuse other requests.
	again, err := c.V1PaymentIntents.Create(ctx, createParams("persist-authorize", 3000))
	if err != nil || again.ID != authorized.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay after the restart: %v, %v", again, err)
	}
	if string(again.LastResponse.RawJSON) != string(authorized.LastResponse.RawJSON) {
		t.Errorf("replayed body\n%s\nwant the first\n%s", again.LastResponse.RawJSON, authorized.LastResponse.RawJSON)
	}
	if _, err := c.V1PaymentIntents.Create(ctx, createParams("persist-authorize", 3100)); stripeError(t, err).Type != stripe.ErrorTypeIdempotency {
		t.Errorf("same key, other parameters, after the restart: %v", err)
	}
	if p := kc.payment("POST", "/api/v1/payments", konbini("lawson", 1500), slipKey...); !cmp.Equal(slip, p) {
		t.Errorf("KOMOJU replay after the restart: %+v, want %+v", p, slip)
	}

	// The objects go on from where they were.
	if a, h := srv.WalletBalance("ali"); a != 46000 || h != 4000 {
		t.Errorf("ali's wallet after the restart: %d available, %d held; want 46000, 4000", a, h)
	}
	if p := kc.payment("POST", "/api/v1/payments/"+hold.ID+"/capture", nil); p.Status != "captured" {
		t.Errorf("capture of the PayPay hold: %s", p.Status)
	}
	if a, h := srv.WalletBalance("ali"); a != 46000 || h != 0 {
		t.Errorf("ali's wallet after the capture: %d available, %d held; want 46000, 0", a, h)
	}
	if _, err := c.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String(paid.ID), Amount: stripe.Int64(4000)}); stripeError(t, err).Code != "amount_too_large" {
		t.Errorf("refund of more than is left (3800): %v", err)
	}
	if pi, err := c.V1PaymentIntents.Capture(ctx, authorized.ID, nil); err != nil || pi.Status != stripe.PaymentIntentStatusSucceeded {
		t.Errorf("capture after the restart: %v, %v", pi, err)
	}

	// The slip issued before the restart is paid after it, and its webhook is delivered.
	resp, err := http.Post(srv.URL()+"/_sandbox/komoju/payments/"+slip.ID+"/pay", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pay the slip: status %d", resp.StatusCode)
	}
	eventually(t, "payment.captured delivered", func() bool { return len(krc.eventsFor(slip.ID)) == 2 })
	evs := krc.eventsFor(slip.ID)
	if evs[1].Type != "payment.captured" || evs[1].Data.Status != "captured" || deliveryIDs[evs[1].deliveryID] {
		t.Errorf("event after the restart: %s %s, delivery %s (ids before: %v)", evs[1].Type, evs[1].Data.Status, evs[1].deliveryID, deliveryIDs)
	}
}

// TestPersistenceSurvivesCrash reads the file as a kill -9 would leave it, without Close: every
// answered request is in it.
func TestPersistenceSurvivesCrash(t *testing.T) {
	dir := t.TempDir()
	srv, c := startSandbox(t, Options{DataDir: dir})
	kc := komojuClient{t: t, base: srv.URL(), key: komojuKey}
	pi, err := authorize(t, c, "pm_card_visa", 900)
	if err != nil {
		t.Fatal(err)
	}
	slip := kc.payment("POST", "/api/v1/payments", konbini("ministop", 800))
	now, err := srv.AdvanceClock(time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	crashed := t.TempDir()
	if err := os.WriteFile(filepath.Join(crashed, snapshotFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	srv2, c2 := startSandbox(t, Options{DataDir: crashed})
	kc2 := komojuClient{t: t, base: srv2.URL(), key: komojuKey}
	if got, err := c2.V1PaymentIntents.Retrieve(context.Background(), pi.ID, nil); err != nil || got.Status != stripe.PaymentIntentStatusRequiresCapture {
		t.Errorf("PaymentIntent from the crashed sandbox's file: %v, %v", got, err)
	}
	if got := kc2.payment("GET", "/api/v1/payments/"+slip.ID, nil); got.Status != "authorized" {
		t.Errorf("slip from the crashed sandbox's file: %s", got.Status)
	}
	if got := srv2.Now(); got.Before(now) {
		t.Errorf("clock %v, want from %v on", got, now)
	}
}

// TestLapsesAfterRestart: what the clock will make due is rebuilt from the file, so an
// authorization and a slip from before a restart still lapse and expire after it, a refund
// request is still paid out, and an idempotency key is still forgotten after 24 hours.
func TestLapsesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	srv, c := startSandbox(t, Options{DataDir: dir})
	kc := komojuClient{t: t, base: srv.URL(), key: komojuKey}
	pi, err := authorize(t, c, "pm_card_visa", 900)
	if err != nil {
		t.Fatal(err)
	}
	slip := kc.payment("POST", "/api/v1/payments", konbini("ministop", 800))
	paid := kc.payment("POST", "/api/v1/payments", konbini("lawson", 600))
	if err := srv.PayKomojuSlip(paid.ID); err != nil {
		t.Fatal(err)
	}
	kc.payment("POST", "/api/v1/payments/"+paid.ID+"/refund", nil)
	if len(srv.idem) == 0 {
		t.Fatal("no idempotency record to forget: the client sent no Idempotency-Key")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	srv2, c2 := startSandbox(t, Options{DataDir: dir})
	kc2 := komojuClient{t: t, base: srv2.URL(), key: komojuKey}
	if _, err := srv2.AdvanceClock(authorizationValidity + time.Second); err != nil {
		t.Fatal(err)
	}
	if got, err := c2.V1PaymentIntents.Retrieve(context.Background(), pi.ID, nil); err != nil || got.Status != stripe.PaymentIntentStatusCanceled {
		t.Errorf("PaymentIntent 7 days after the restart: %v, %v; want canceled", got, err)
	}
	if got := kc2.payment("GET", "/api/v1/payments/"+slip.ID, nil); got.Status != "expired" {
		t.Errorf("slip 7 days after the restart: %s, want expired", got.Status)
	}
	if got := kc2.payment("GET", "/api/v1/payments/"+paid.ID, nil); got.Status != "refunded" || got.RefundRequests[0].Status != "completed" {
		t.Errorf("refund requested before the restart, 7 days after it: %s, request %+v; want refunded, paid out", got.Status, got.RefundRequests)
	}
	if n := len(srv2.idem); n != 0 {
		t.Errorf("%d idempotency records kept after 7 days, want 0", n)
	}
}

// TestPersistenceRedeliversUndelivered: a webhook delivery that had not ended when the sandbox
// stopped is made again by the next start; one that had ended is not.
func TestPersistenceRedeliversUndelivered(t *testing.T) {
	dir := t.TempDir()
	rc := newReceiver(t, testSecret)
	krc := newKomojuReceiver(t, komojuSecret)
	opts := Options{
		DataDir: dir, WebhookRetry: fastRetry,
		WebhookURL: rc.URL, WebhookSecret: testSecret, KomojuWebhookURL: krc.URL, KomojuWebhookSecret: komojuSecret,
	}
	srv, c := startSandbox(t, opts)
	kc := komojuClient{t: t, base: srv.URL(), key: komojuKey}
	delivered, err := authorize(t, c, "pm_card_visa", 100)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first events delivered", func() bool { return allDelivered(srv) && len(srv.Deliveries()) == 3 })

	if err := srv.SetWebhookFault(WebhookFault{Mode: FaultDelay, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	pending, err := authorize(t, c, "pm_card_visa", 200)
	if err != nil {
		t.Fatal(err)
	}
	slip := kc.payment("POST", "/api/v1/payments", konbini("lawson", 300))
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if got := rc.eventsFor(pending.ID); len(got) != 0 {
		t.Fatalf("delayed events arrived before the restart: %v", got)
	}

	srv, _ = startSandbox(t, opts)
	want := []string{"charge.succeeded", "payment_intent.amount_capturable_updated", "payment_intent.created"}
	eventually(t, "the undelivered events delivered", func() bool {
		return slices.Equal(want, sortedCopy(rc.eventsFor(pending.ID))) && len(krc.eventsFor(slip.ID)) == 1
	})
	eventually(t, "deliveries recorded", func() bool { return allDelivered(srv) && len(srv.Deliveries()) == 4 })
	rc.mu.Lock()
	for id, n := range rc.seen {
		if n != 1 {
			t.Errorf("event %s received %d times", id, n)
		}
	}
	rc.mu.Unlock()
	if got := rc.eventsFor(delivered.ID); len(got) != 3 {
		t.Errorf("events of the PaymentIntent delivered before the restart: %v", got)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	// Delivered now, so a third start sends nothing.
	srv, _ = startSandbox(t, opts)
	if ds := srv.Deliveries(); len(ds) != 0 {
		t.Errorf("deliveries at the third start: %+v", ds)
	}
}

func TestPersistenceRefusesBadFile(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"not JSON", `{"version": 1, "payment_intents": [`, "not a paysim snapshot"},
		{"no version", `{"payment_intents": []}`, "no version"},
		{"other version", `{"version": 2}`, "version 2"},
		{"wrong shape", `{"version": 1, "payment_intents": {}}`, "not a paysim snapshot"},
		{"dangling reference", `{"version": 1, "payment_intents": [{"id": "pi_x", "payment_method": "pm_gone"}]}`, "no payment method pm_gone"},
		{"unknown test card", `{"version": 1, "payment_methods": [{"id": "pm_x", "token": "pm_card_unknown"}]}`, "pm_card_unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), snapshotFile)
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			srv, err := Start(context.Background(), Options{DataDir: filepath.Dir(path)})
			if err == nil {
				srv.Close()
				t.Fatal("Start accepted the file")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start: %v; want an error naming %s and saying %q", err, path, tt.want)
			}
			if data, _ := os.ReadFile(path); string(data) != tt.content {
				t.Errorf("the refused file was changed to %s", data)
			}
		})
	}
}

func TestPersistenceNewDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "paysim")
	srv, _ := startSandbox(t, Options{DataDir: dir, WalletBalances: map[string]int64{"kim": 700}})
	var snap struct {
		Version int                   `json:"version"`
		Wallets map[string]snapWallet `json:"wallets"`
	}
	data, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &snap); err != nil || snap.Version != snapshotVersion || snap.Wallets["kim"].Available != 700 {
		t.Errorf("first snapshot %s: %v", data, err)
	}
	if a, _ := srv.WalletBalance("kim"); a != 700 {
		t.Errorf("kim's wallet %d, want 700", a)
	}
}

// TestPersistenceWriteFailure: a change that cannot be saved is not acknowledged.
func TestPersistenceWriteFailure(t *testing.T) {
	dir := t.TempDir()
	srv, _ := startSandbox(t, Options{DataDir: dir})
	kc := komojuClient{t: t, base: srv.URL(), key: komojuKey}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	e := kc.failure(http.StatusInternalServerError, "internal_server_error", "POST", "/api/v1/payments", konbini("lawson", 100))
	if !strings.Contains(e.Error.Message, "could not save its state") {
		t.Errorf("message %q", e.Error.Message)
	}
	if _, err := srv.AdvanceClock(time.Minute); !errors.Is(err, errNotSaved) {
		t.Errorf("AdvanceClock: %v, want errNotSaved", err)
	}
}

// BenchmarkCreateConfirm is the gateway's authorization (one create with confirm=true, manual
// capture) through stripe-go, in memory and with a DataDir that starts with the state of 0,
// 1,000 or 10,000 earlier authorizations: each write is the whole state, so its cost grows
// with it (and with every iteration; KiB-file-at-end is the size it reached).
func BenchmarkCreateConfirm(b *testing.B) {
	for _, bc := range []struct {
		name      string
		dataDir   bool
		preloaded int
	}{
		{"memory", false, 0},
		{"data-dir/state=0", true, 0},
		{"data-dir/state=1000", true, 1000},
		{"data-dir/state=10000", true, 10000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var opts Options
			if bc.dataDir {
				opts.DataDir = b.TempDir()
				if bc.preloaded > 0 {
					preload(b, opts.DataDir, bc.preloaded)
				}
			}
			srv, err := Start(context.Background(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			c := newClient(srv.URL(), testKey)
			params := &stripe.PaymentIntentCreateParams{
				Amount: stripe.Int64(1000), Currency: stripe.String("jpy"), PaymentMethod: stripe.String("pm_card_visa"),
				CaptureMethod: stripe.String("manual"), Confirm: stripe.Bool(true),
			}
			for b.Loop() {
				if _, err := c.V1PaymentIntents.Create(context.Background(), params); err != nil {
					b.Fatal(err)
				}
			}
			if bc.dataDir {
				if fi, err := os.Stat(filepath.Join(opts.DataDir, snapshotFile)); err == nil {
					b.ReportMetric(float64(fi.Size())/1024, "KiB-file-at-end")
				}
			}
		})
	}
}

// preload writes into dir the snapshot of a sandbox that authorized n payments (made in memory,
// so that preloading does not pay for n growing writes).
func preload(b *testing.B, dir string, n int) {
	b.Helper()
	srv, err := Start(context.Background(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	c := newClient(srv.URL(), testKey)
	for i := range n {
		p := &stripe.PaymentIntentCreateParams{
			Amount: stripe.Int64(int64(1000 + i)), Currency: stripe.String("jpy"), PaymentMethod: stripe.String("pm_card_visa"),
			CaptureMethod: stripe.String("manual"), Confirm: stripe.Bool(true), Metadata: map[string]string{"order_id": fmt.Sprint("o-", i)},
		}
		if _, err := c.V1PaymentIntents.Create(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
	srv.mu.Lock()
	data := srv.encodeSnapshotLocked(nil)
	srv.mu.Unlock()
	if err := os.WriteFile(filepath.Join(dir, snapshotFile), data, 0o644); err != nil {
		b.Fatal(err)
	}
}

// TestSnapshotEncoding: the memos never write a stale record (every change of an object is
// seen), and a loaded snapshot writes the same file again.
func TestSnapshotEncoding(t *testing.T) {
	dir := t.TempDir()
	srv, c := startSandbox(t, Options{DataDir: dir})
	kc := komojuClient{t: t, base: srv.URL(), key: komojuKey}
	ctx := context.Background()
	auth, err := authorize(t, c, "pm_card_visa", 1000)
	if err != nil {
		t.Fatal(err)
	}
	pi, err := c.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(500), Currency: stripe.String("usd"), Metadata: map[string]string{"order_id": "o-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	slip := kc.payment("POST", "/api/v1/payments", konbini("lawson", 700))
	hold := kc.payment("POST", "/api/v1/payments", payPay("ali", 900, false))
	kc.payment("POST", "/api/v1/payments", bankTransfer(300))

	// Every object changes after its record was first written.
	if _, err := c.V1PaymentIntents.Capture(ctx, auth.ID, &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(800)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String(auth.ID), Amount: stripe.Int64(100)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.V1PaymentIntents.Confirm(ctx, pi.ID, &stripe.PaymentIntentConfirmParams{PaymentMethod: stripe.String("pm_card_chargeDeclined")}); err == nil {
		t.Fatal("confirm with a declined card succeeded")
	}
	if _, err := c.V1PaymentIntents.Confirm(ctx, pi.ID, &stripe.PaymentIntentConfirmParams{PaymentMethod: stripe.String("pm_card_visa")}); err != nil {
		t.Fatal(err)
	}
	if err := srv.PayKomojuSlip(slip.ID); err != nil {
		t.Fatal(err)
	}
	kc.payment("POST", "/api/v1/payments/"+slip.ID+"/refund", map[string]any{"amount": 200})
	if err := srv.RejectKomojuRefund(slip.ID); err != nil {
		t.Fatal(err)
	}
	kc.payment("POST", "/api/v1/payments/"+slip.ID+"/refund", map[string]any{"amount": 300})
	kc.payment("POST", "/api/v1/payments/"+hold.ID+"/cancel", nil)

	encode := func(s *Server, fresh bool) map[string]any {
		t.Helper()
		s.mu.Lock()
		defer s.mu.Unlock()
		if fresh {
			for _, pi := range s.intents {
				pi.saved = memo[intentMemoKey]{}
			}
			for _, ch := range s.charges {
				ch.saved = memo[snapCharge]{}
			}
			for _, p := range s.komoju.payments {
				p.saved = memo[komojuMemoKey]{}
			}
		}
		var v map[string]any
		if err := json.Unmarshal(s.encodeSnapshotLocked(nil), &v); err != nil {
			t.Fatal(err)
		}
		delete(v, "now") // the time of the encoding
		return v
	}
	// Objects kept in maps are written in map order.
	anyOrder := cmpopts.SortSlices(func(a, b any) bool { return fmt.Sprint(a) < fmt.Sprint(b) })
	memoized := encode(srv, false)
	if diff := cmp.Diff(encode(srv, true), memoized, anyOrder); diff != "" {
		t.Errorf("snapshot from the memos (-encoded afresh +memos):\n%s", diff)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv, _ = startSandbox(t, Options{DataDir: dir})
	if diff := cmp.Diff(memoized, encode(srv, false), anyOrder); diff != "" {
		t.Errorf("snapshot of the loaded state (-written +loaded):\n%s", diff)
	}
}
