package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"
	stripego "github.com/stripe/stripe-go/v82"

	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
)

// hostileMaxBody is the gateway's MAX_BODY_BYTES in the hostile tests: small, so that a huge body
// is cheap to send.
const hostileMaxBody = 64 << 10

// webhookRequest is a request to POST /webhooks/{provider}.
type webhookRequest struct {
	name        string
	provider    string // "stripe" or "komoju"
	body        string
	header      map[string]string
	contentType string // "" sends application/json
	// shortBy declares a Content-Length this much longer than the body and stops sending.
	shortBy int
	status  int
	detail  string // in the problem's detail
}

// TestHostileWebhooks: forged, unsigned, stale, malformed, truncated and huge webhooks of both
// providers, each sent to the running gateway, get a 4xx problem, and none of them is stored or
// moves a payment: the card payment stays AUTHORIZED and the konbini slip PENDING, and no
// ProviderEvents row carries their event ids. A webhook of an event type the gateway does not
// handle, correctly signed, is acknowledged (200 "ignored": a 4xx would make the provider retry it
// for days) and stored neither. KOMOJU signs no timestamp, so a replayed KOMOJU webhook is
// de-duplicated by its event id: the second delivery changes nothing.
func TestHostileWebhooks(t *testing.T) {
	s := startSystem(t, map[string]string{"MAX_BODY_BYTES": fmt.Sprint(hostileMaxBody)})
	cardOrder, konbiniOrder := uuid.NewString(), uuid.NewString()
	if status := s.deliver(t, cardOrder, `{"method":"card","payment_method":"pm_card_visa"}`); status != http.StatusOK {
		t.Fatalf("card order.awaiting_payment: %d", status)
	}
	if status := s.deliver(t, konbiniOrder, `{"method":"konbini","store":"lawson"}`); status != http.StatusOK {
		t.Fatalf("konbini order.awaiting_payment: %d", status)
	}
	card, konbini := s.payment(t, cardOrder), s.payment(t, konbiniOrder)
	if card.status != "AUTHORIZED" || konbini.status != "PENDING" {
		t.Fatalf("card %+v, konbini %+v: want AUTHORIZED and PENDING", card, konbini)
	}

	now := time.Now()
	// What a forger would like the gateway to believe: the card's authorization cancelled, the
	// slip paid.
	cancelCard := stripeEvent("evt_hostile_cancel", "payment_intent.canceled", card, "canceled")
	paySlip := komojuEvent("ev_hostile_paid", "payment.captured", konbini, "captured")
	huge := `{"id":"evt_hostile_huge","padding":"` + strings.Repeat("x", 2*hostileMaxBody) + `"}`
	stripeSigned := func(body string, at time.Time) map[string]string {
		return map[string]string{"Stripe-Signature": paysim.SignatureHeader([]byte(body), stripeSecret, at)}
	}
	komojuSigned := func(body, secret string) map[string]string {
		return map[string]string{"X-Komoju-Signature": paysim.KomojuSignature([]byte(body), secret)}
	}
	tests := []webhookRequest{
		{name: "stripe: no signature", provider: "stripe", body: cancelCard, status: 400, detail: "no Stripe-Signature header"},
		{name: "stripe: signed with another secret", provider: "stripe", body: cancelCard, header: map[string]string{"Stripe-Signature": paysim.SignatureHeader([]byte(cancelCard), "whsec_forger", now)}, status: 400},
		{name: "stripe: a signature without a timestamp", provider: "stripe", body: cancelCard, header: map[string]string{"Stripe-Signature": "v1=" + strings.Repeat("0", 64)}, status: 400},
		{name: "stripe: replayed 10 minutes later (outside the tolerance)", provider: "stripe", body: cancelCard, header: stripeSigned(cancelCard, now.Add(-10*time.Minute)), status: 400, detail: "tolerated"},
		{name: "stripe: signed, then truncated", provider: "stripe", body: cancelCard[:len(cancelCard)/2], header: stripeSigned(cancelCard, now), status: 400},
		{name: "stripe: malformed JSON, signed", provider: "stripe", body: `{"id":"evt_hostile_json","type":`, header: stripeSigned(`{"id":"evt_hostile_json","type":`, now), status: 400, detail: "the signed body is not JSON"},
		{name: "stripe: an empty body, signed", provider: "stripe", body: "", header: stripeSigned("", now), status: 400, detail: "the signed body is not JSON"},
		{name: "stripe: a payment intent event without its object, signed", provider: "stripe", body: stripeRaw("evt_hostile_noobj", "payment_intent.canceled", `{}`), header: stripeSigned(stripeRaw("evt_hostile_noobj", "payment_intent.canceled", `{}`), now), status: 400},
		{name: "stripe: wrong Content-Type, unsigned", provider: "stripe", body: cancelCard, contentType: "text/plain", status: 400},
		{name: "stripe: a body shorter than its Content-Length", provider: "stripe", body: cancelCard, header: stripeSigned(cancelCard, now), shortBy: 10, status: 400, detail: "the request body could not be read"},
		{name: "stripe: a huge body", provider: "stripe", body: huge, header: stripeSigned(huge, now), status: 413, detail: "request body exceeds"},
		{name: "stripe: an event type the gateway does not handle, signed", provider: "stripe", body: stripeRaw("evt_hostile_unknown", "customer.created", `{"object":"customer","id":"cus_1"}`), header: stripeSigned(stripeRaw("evt_hostile_unknown", "customer.created", `{"object":"customer","id":"cus_1"}`), now), status: 200},

		{name: "komoju: no signature", provider: "komoju", body: paySlip, status: 400, detail: "no X-Komoju-Signature header"},
		{name: "komoju: signed with another secret", provider: "komoju", body: paySlip, header: komojuSigned(paySlip, "komoju_forger"), status: 400},
		{name: "komoju: a signature that is not hex", provider: "komoju", body: paySlip, header: map[string]string{"X-Komoju-Signature": "zz"}, status: 400, detail: "is not hex"},
		{name: "komoju: signed, then truncated", provider: "komoju", body: paySlip[:len(paySlip)/2], header: komojuSigned(paySlip, komojuSecret), status: 400},
		{name: "komoju: malformed JSON, signed", provider: "komoju", body: `{"id":"ev_hostile_json",`, header: komojuSigned(`{"id":"ev_hostile_json",`, komojuSecret), status: 400},
		{name: "komoju: a payment event without a payment, signed", provider: "komoju", body: `{"id":"ev_hostile_nodata","type":"payment.captured"}`, header: komojuSigned(`{"id":"ev_hostile_nodata","type":"payment.captured"}`, komojuSecret), status: 400},
		{name: "komoju: wrong Content-Type, unsigned", provider: "komoju", body: paySlip, contentType: "application/x-www-form-urlencoded", status: 400},
		{name: "komoju: a body shorter than its Content-Length", provider: "komoju", body: paySlip, header: komojuSigned(paySlip, komojuSecret), shortBy: 10, status: 400, detail: "the request body could not be read"},
		{name: "komoju: a huge body", provider: "komoju", body: huge, header: komojuSigned(huge, komojuSecret), status: 413, detail: "request body exceeds"},
		{name: "komoju: an event type the gateway does not handle, signed", provider: "komoju", body: `{"id":"ev_hostile_unknown","type":"settlement.created","data":{}}`, header: komojuSigned(`{"id":"ev_hostile_unknown","type":"settlement.created","data":{}}`, komojuSecret), status: 200},

		{name: "an unknown provider", provider: "paypal", body: cancelCard, status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.status != http.StatusOK {
				platformtest.Refuse(t, s.url, tt.hostile())
				return
			}
			status, _, body := s.postWebhook(t, tt)
			if status != tt.status || !strings.Contains(string(body), `"ignored"`) {
				t.Errorf("%d %s, want %d with the result ignored", status, body, tt.status)
			}
		})
	}
	if got := s.payment(t, cardOrder); got.status != "AUTHORIZED" || got.version != card.version {
		t.Errorf("card payment after the hostile webhooks: %+v, want it unchanged (%+v)", got, card)
	}
	if got := s.payment(t, konbiniOrder); got.status != "PENDING" || got.version != konbini.version {
		t.Errorf("konbini payment after the hostile webhooks: %+v, want it unchanged (%+v)", got, konbini)
	}
	if stored := s.providerEvents(t, "evt_hostile_%", "ev_hostile_%"); len(stored) != 0 {
		t.Errorf("hostile webhooks stored as provider events: %v", stored)
	}

	// A correctly signed KOMOJU webhook, delivered twice: applied once, the replay a duplicate.
	replayed := komojuEvent("ev_replayed", "payment.captured", konbini, "captured")
	header := komojuSigned(replayed, komojuSecret)
	for i, want := range []string{`"applied"`, `"duplicate"`} {
		status, _, body := s.postWebhook(t, webhookRequest{provider: "komoju", body: replayed, header: header})
		if status != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("KOMOJU webhook, delivery %d: %d %s, want 200 %s", i+1, status, body, want)
		}
	}
	paid := s.payment(t, konbiniOrder)
	if paid.status != "AUTHORIZED" || paid.version != konbini.version+1 {
		t.Errorf("konbini payment after a paid slip's webhook twice: %+v, want AUTHORIZED one version on (%d)", paid, konbini.version+1)
	}
	if stored := s.providerEvents(t, "ev_replayed"); len(stored) != 1 {
		t.Errorf("provider events of the replayed webhook: %v, want one", stored)
	}
}

// storedPayment is a Payments row, as the database holds it.
type storedPayment struct {
	id, providerID, status string
	version                int64
}

// payment reads the one payment of order from the database.
func (s *system) payment(t *testing.T, order string) storedPayment {
	t.Helper()
	var out []storedPayment
	err := s.client.Single().Query(context.Background(), spanner.Statement{
		SQL:    "SELECT PaymentId, IFNULL(ProviderPaymentId, ''), Status, Version FROM Payments WHERE OrderId = @order",
		Params: map[string]any{"order": order},
	}).Do(func(r *spanner.Row) error {
		var p storedPayment
		if err := r.Columns(&p.id, &p.providerID, &p.status, &p.version); err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 {
		t.Fatalf("payments of order %s: %+v, want one", order, out)
	}
	return out[0]
}

// providerEvents returns the ProviderEventIds of the stored provider events that match one of
// the LIKE patterns.
func (s *system) providerEvents(t *testing.T, patterns ...string) []string {
	t.Helper()
	var ids []string
	err := s.client.Single().Query(context.Background(), spanner.Statement{
		SQL:    "SELECT ProviderEventId FROM ProviderEvents, UNNEST(@patterns) AS p WHERE ProviderEventId LIKE p",
		Params: map[string]any{"patterns": patterns},
	}).Do(func(r *spanner.Row) error {
		var id string
		ids = append(ids, id)
		return r.Columns(&ids[len(ids)-1])
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// hostile is r as platformtest sends it: JSON unless r says otherwise.
func (r webhookRequest) hostile() platformtest.Hostile {
	ct := r.contentType
	if ct == "" {
		ct = "application/json; charset=utf-8"
	}
	h := map[string]string{"Content-Type": ct}
	maps.Copy(h, r.header)
	return platformtest.Hostile{Name: r.name, Path: "/webhooks/" + r.provider, Header: h, Body: r.body, ShortBy: r.shortBy,
		Status: r.status, Detail: r.detail}
}

// postWebhook sends r to the gateway over a plain TCP connection and reads the answer.
func (s *system) postWebhook(t *testing.T, r webhookRequest) (int, http.Header, []byte) {
	t.Helper()
	h := r.hostile()
	return platformtest.RawPost(t, s.url, platformtest.RawRequest{Path: h.Path, Header: h.Header, Body: h.Body, ShortBy: h.ShortBy})
}

// stripeEvent is a Stripe event of type typ about the PaymentIntent of p, now in status.
func stripeEvent(id, typ string, p storedPayment, status string) string {
	return stripeRaw(id, typ, fmt.Sprintf(`{"id":%q,"object":"payment_intent","status":%q,"amount":1800,"amount_capturable":0,"currency":"jpy","metadata":{"spanmart_payment_id":%q}}`,
		p.providerID, status, p.id))
}

// stripeRaw is a Stripe event of type typ carrying object, in the API version stripe-go reads.
func stripeRaw(id, typ, object string) string {
	return fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"api_version":%q,"created":%d,"data":{"object":%s}}`,
		id, typ, stripego.APIVersion, time.Now().Unix(), object)
}

// komojuEvent is a KOMOJU event of type typ about the konbini payment p, now in status.
func komojuEvent(id, typ string, p storedPayment, status string) string {
	return fmt.Sprintf(`{"id":%q,"type":%q,"data":{"id":%q,"status":%q,"amount":1800,"currency":"JPY","payment_details":{"type":"konbini","store":"lawson"},"metadata":{"payment_id":%q}}}`,
		id, typ, p.providerID, status, p.id)
}
