package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/emulator/oidc"
	"github.com/spanmart/spanmart/gen/dao/notificationsdb"
	"github.com/spanmart/spanmart/internal/mailtest"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/faults"
	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/notifications/api"
)

const (
	audience      = "http://notifications.test"
	relayEmail    = "relay@spanmart.test"
	operatorEmail = "operator@spanmart.test"
	fromHeader    = "Spanmart <no-reply@spanmart.example>"
)

// system is the service as run wires it (PORT=0, a fresh notifications database), an in-process
// SMTP server, and an OIDC issuer served over HTTP (discovery and JWKS) that mints the relay's
// and the operator's tokens, as the Tasks emulator does.
type system struct {
	url    string
	client *spanner.Client
	db     string
	issuer *oidc.Issuer
	idpURL string
	mail   *mailtest.Server
}

// newSystem makes the database, the mail server and the issuer; start runs the service.
func newSystem(t *testing.T) *system {
	t.Helper()
	client, name := env.NewDatabase(t, dbschema.Notifications)
	ln := platformtest.Listen(t)
	issuer, err := oidc.NewIssuer("http://"+ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	idp := &httptest.Server{Listener: ln, Config: &http.Server{Handler: issuer.Handler()}}
	idp.Start()
	t.Cleanup(idp.Close)
	mail, err := mailtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mail.Close() })
	return &system{client: client, db: name, issuer: issuer, idpURL: idp.URL, mail: mail}
}

// vars is the service's environment; extra pairs override.
func (s *system) vars(extra ...string) map[string]string {
	v := map[string]string{
		"SPANNER_DATABASE": s.db, "PORT": "0",
		"OIDC_ISSUER": s.idpURL, "OIDC_AUDIENCE": audience, "OIDC_ALLOWED_EMAILS": relayEmail, "ADMIN_ALLOWED_EMAILS": operatorEmail,
		"SMTP_ADDR": s.mail.Addr(), "SMTP_FROM": fromHeader, "SMTP_TIMEOUT": "10s",
		// Short, so that a retry is due at once (production: 1m).
		"NOTIFICATIONS_RESUME_AFTER": "1ms", "NOTIFICATIONS_MAX_ATTEMPTS": "3",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v[extra[i]] = extra[i+1]
	}
	return v
}

func (s *system) start(t *testing.T, extra ...string) *system {
	t.Helper()
	cfg, err := loadConfig(platformtest.Getenv(s.vars(extra...)))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := platformtest.NewLogger(t, serviceName)
	platformtest.Start(t, func(ctx context.Context) error { return run(ctx, cfg, log) })
	s.url = platformtest.StartedURL(t, logs)
	return s
}

func startSystem(t *testing.T) *system { t.Helper(); return newSystem(t).start(t) }

func (s *system) token(t *testing.T, email string) string {
	t.Helper()
	tok, err := s.issuer.Mint(audience, email, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// event is an event as the relay delivers it to this subscriber.
type event struct {
	outboxlib.Event
	predecessor int64 // ce-predecessorversion: the aggregate's previous version routed here
}

func orderEvent(typ, orderID string, version, predecessor int64, payload string) event {
	return event{outboxlib.Event{
		ID: uuid.NewString(), Type: typ, Source: "//spanmart/orders", AggregateType: "order", AggregateID: orderID,
		AggregateVersion: version, SchemaVersion: 1, OccurredAt: time.Now().UTC(), Payload: json.RawMessage(payload),
	}, predecessor}
}

func paymentEvent(typ, paymentID string, version, predecessor int64, payload string) event {
	return event{outboxlib.Event{
		ID: uuid.NewString(), Type: typ, Source: "//spanmart/gateway-abstraction", AggregateType: "payment", AggregateID: paymentID,
		AggregateVersion: version, SchemaVersion: 1, OccurredAt: time.Now().UTC(), Payload: json.RawMessage(payload),
	}, predecessor}
}

func created(orderID, email, language string) event {
	return orderEvent("order.created", orderID, 1, 0, fmt.Sprintf(
		`{"order_id":%q,"customer_id":"c-1","status":"PENDING","currency":"JPY","total_minor":3100,"email":%q,"language":%q,
		  "lines":[{"sku":"TEA-001","quantity":2,"unit_price_minor":1200},{"sku":"CUP-002","quantity":1,"unit_price_minor":700}]}`,
		orderID, email, language))
}

func confirmed(orderID string) event {
	return orderEvent("order.confirmed", orderID, 3, 1, fmt.Sprintf(
		`{"order_id":%q,"customer_id":"c-1","status":"CONFIRMED","currency":"JPY","total_minor":3100,"email":"ignored@example.com","language":"en",
		  "lines":[{"sku":"TEA-001","quantity":2,"unit_price_minor":1200},{"sku":"CUP-002","quantity":1,"unit_price_minor":700}]}`, orderID))
}

func pending(orderID, paymentID string) event {
	return paymentEvent("payment.pending", paymentID, 1, 0, fmt.Sprintf(
		`{"payment_id":%q,"order_id":%q,"method":"konbini","provider":"komoju","status":"PENDING","amount_minor":3100,"currency":"JPY",
		  "slip":{"method":"konbini","store":"lawson","payment_code":"123456789012","confirmation_code":"4321",
		          "instructions_url":"https://komoju.example/slips/1","expires_at":"2025-03-14T14:59:00Z"}}`, paymentID, orderID))
}

// deliver posts e to POST /events the way Cloud Tasks does and returns the status and outcome.
func (s *system) deliver(t *testing.T, e event) (int, string) {
	t.Helper()
	status, outcome, err := s.post(e, s.token(t, relayEmail))
	if err != nil {
		t.Fatal(err)
	}
	return status, outcome
}

func (s *system) post(e event, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, s.url+outboxlib.PathEvents, bytes.NewReader(e.Payload))
	if err != nil {
		return 0, "", err
	}
	for k, v := range e.Headers() {
		req.Header.Set(k, v)
	}
	req.Header.Set(outboxlib.HeaderPredecessorVersion, strconv.FormatInt(e.predecessor, 10))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var r struct {
		Outcome string `json:"outcome"`
	}
	body, _ := io.ReadAll(resp.Body)
	json.Unmarshal(body, &r)
	return resp.StatusCode, r.Outcome, nil
}

// mustDeliver delivers e and fails unless it is answered 200.
func (s *system) mustDeliver(t *testing.T, e event) string {
	t.Helper()
	status, outcome := s.deliver(t, e)
	if status != http.StatusOK {
		t.Fatalf("POST /events %s: %d %s, want 200", e.Type, status, outcome)
	}
	return outcome
}

// confirmUnsent delivers an order.created (to ali@example.com) and, once fail has made the mail
// server fail temporarily, the order's order.confirmed, which must be answered 200: applied, its
// e-mail deferred and left to the sweep (a 503 would slow down the whole queue).
func (s *system) confirmUnsent(t *testing.T, orderID string, fail func()) event {
	t.Helper()
	s.mustDeliver(t, created(orderID, "ali@example.com", "en"))
	fail()
	conf := confirmed(orderID)
	if outcome := s.mustDeliver(t, conf); outcome != outboxlib.OutcomeApplied {
		t.Fatalf("order.confirmed while the mail server fails: %s, want applied", outcome)
	}
	if n := s.only(t, orderID); n.Status != "PENDING" || n.Attempts != 1 {
		t.Fatalf("after the failed attempt: %+v, want PENDING after 1 attempt", n)
	}
	return conf
}

// sweepUntil runs the sweep (POST /admin/sweep, as Cloud Scheduler does) until done holds for its
// report.
func (s *system) sweepUntil(t *testing.T, what string, done func(api.Sweep) bool) {
	t.Helper()
	platformtest.Eventually(t, what, func() bool {
		status, body := s.do(t, http.MethodPost, "/admin/sweep", s.token(t, operatorEmail))
		if status != http.StatusOK {
			t.Fatalf("sweep: %d %s", status, body)
		}
		var rep api.Sweep
		if err := json.Unmarshal(body, &rep); err != nil {
			t.Fatalf("sweep: %v: %s", err, body)
		}
		return done(rep)
	})
}

// sent is a sweepUntil condition: the sweep sent an e-mail.
func sent(rep api.Sweep) bool { return rep.Sent == 1 }

func (s *system) do(t *testing.T, method, path, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (s *system) notifications(t *testing.T, orderID string) []api.Notification {
	t.Helper()
	status, body := s.do(t, http.MethodGet, "/admin/notifications?order_id="+orderID, s.token(t, operatorEmail))
	if status != http.StatusOK {
		t.Fatalf("GET /admin/notifications: %d %s", status, body)
	}
	var list api.NotificationList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	return list.Notifications
}

// only returns the order's one notification, failing unless there is exactly one.
func (s *system) only(t *testing.T, orderID string) api.Notification {
	t.Helper()
	ns := s.notifications(t, orderID)
	if len(ns) != 1 {
		t.Fatalf("notifications of %s: %+v, want one", orderID, ns)
	}
	return ns[0]
}

func (s *system) metric(t *testing.T, series string) string {
	t.Helper()
	_, body := s.do(t, http.MethodGet, "/metrics", "")
	for _, line := range strings.Split(string(body), "\n") {
		if name, value, ok := strings.Cut(line, " "); ok && name == series {
			return value
		}
	}
	return ""
}

func (s *system) waitMail(t *testing.T, match func(mailtest.Message) bool) mailtest.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), platformtest.Timeout)
	defer cancel()
	m, err := s.mail.Wait(ctx, match)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func withMessageID(id string) func(mailtest.Message) bool {
	return func(m mailtest.Message) bool { return m.MessageID() == id }
}

func messageID(eventID, template string) string {
	return "<" + eventID + "." + template + "@notifications.spanmart>"
}

// TestOrderConfirmedEmail: order.created records the contact and sends nothing; order.confirmed
// sends one Japanese e-mail (multipart text + HTML, the subject RFC 2047-encoded) before the
// delivery is answered; a redelivery of the same event sends nothing more.
func TestOrderConfirmedEmail(t *testing.T) {
	s := startSystem(t)
	orderID := uuid.NewString()
	s.mustDeliver(t, created(orderID, "ali@example.com", "ja"))
	if n := len(s.mail.Messages()); n != 0 {
		t.Fatalf("order.created sent %d e-mails, want none", n)
	}
	conf := confirmed(orderID)
	s.mustDeliver(t, conf)

	msgs := s.mail.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d e-mails after order.confirmed, want 1 (sent before the delivery is answered)", len(msgs))
	}
	m := msgs[0]
	if m.From != "no-reply@spanmart.example" || len(m.To) != 1 || m.To[0] != "ali@example.com" {
		t.Errorf("envelope from %q to %q", m.From, m.To)
	}
	if m.MessageID() != messageID(conf.ID, "order_confirmed") {
		t.Errorf("Message-ID %q, want %q", m.MessageID(), messageID(conf.ID, "order_confirmed"))
	}
	if subject, err := m.Subject(); err != nil || subject != "ご注文を承りました (注文番号 "+orderID+")" {
		t.Errorf("subject %q (%v)", subject, err)
	}
	if !strings.HasPrefix(m.Header.Get("Subject"), "=?UTF-8?B?") {
		t.Errorf("raw subject %q is not RFC 2047-encoded", m.Header.Get("Subject"))
	}
	for name, want := range map[string]string{
		"X-Spanmart-Event": "order.confirmed; id=" + conf.ID, "X-Spanmart-Template": "order_confirmed",
		"X-Spanmart-Order": orderID, "From": `"Spanmart" <no-reply@spanmart.example>`,
	} {
		if got := m.Header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	text, err := m.Part("text/plain")
	if err != nil || !strings.Contains(text, "¥3,100") || !strings.Contains(text, "TEA-001") {
		t.Errorf("text part (%v):\n%s", err, text)
	}
	html, err := m.Part("text/html")
	if err != nil || !strings.Contains(html, `<html lang="ja">`) || !strings.Contains(html, "¥2,400") {
		t.Errorf("HTML part (%v):\n%s", err, html)
	}

	// The queue delivers the same event again: the inbox absorbs it, the effect finds it sent.
	if outcome := s.mustDeliver(t, conf); outcome != outboxlib.OutcomeDuplicate {
		t.Errorf("redelivery outcome %q, want duplicate", outcome)
	}
	if n := len(s.mail.Messages()); n != 1 {
		t.Errorf("%d e-mails after a redelivery, want still 1", n)
	}
	n := s.only(t, orderID)
	if n.Status != "SENT" || n.Attempts != 1 || n.Template != "order_confirmed" || n.Language != "ja" || n.SentAt == nil ||
		n.MessageID != m.MessageID() || n.EventID != conf.ID || n.EventType != "order.confirmed" {
		t.Errorf("notification %+v", n)
	}
	if got := s.metric(t, `notifications_sent_total{result="sent",template="order_confirmed"}`); got != "1" {
		t.Errorf("notifications_sent_total sent = %q, want 1", got)
	}
	if got := s.metric(t, `notifications_smtp_send_seconds_count{result="accepted"}`); got != "1" {
		t.Errorf("notifications_smtp_send_seconds_count accepted = %q, want 1", got)
	}
}

// TestEveryEmailEvent: each e-mail event sends its template, in the contact's language (English
// here, whatever later events carry), to the address order.created gave.
func TestEveryEmailEvent(t *testing.T) {
	s := startSystem(t)
	shipped, cancelled := uuid.NewString(), uuid.NewString()
	paymentID := uuid.NewString()
	s.mustDeliver(t, created(shipped, "bob@example.com", "en"))
	s.mustDeliver(t, created(cancelled, "bob@example.com", "en"))
	events := []struct {
		e        event
		template string
		subject  string
		shows    []string
	}{
		{confirmed(shipped), "order_confirmed", "Your order " + shipped + " is confirmed", []string{"¥3,100"}},
		{pending(shipped, paymentID), "payment_instructions", "How to pay for your order " + shipped,
			[]string{"Lawson", "123456789012", "4321", "https://komoju.example/slips/1", "Fri, 14 Mar 2025 23:59 JST", "¥3,100"}},
		{orderEvent("order.shipped", shipped, 5, 3, fmt.Sprintf(`{"order_id":%q,"status":"SHIPPED","currency":"JPY","total_minor":3100,
			"shipment":{"shipment_id":"s-1","carrier":"yamato","tracking_number":"4455-6677-8899"}}`, shipped)),
			"order_shipped", "Your order " + shipped + " has shipped", []string{"Yamato Transport", "4455-6677-8899"}},
		{paymentEvent("payment.refunded", paymentID, 4, 1, fmt.Sprintf(`{"payment_id":%q,"order_id":%q,"method":"konbini",
			"status":"REFUNDED","amount_minor":3100,"currency":"JPY"}`, paymentID, shipped)),
			"payment_refunded", "Your refund for order " + shipped, []string{"¥3,100"}},
		{orderEvent("order.cancelled", cancelled, 2, 1, fmt.Sprintf(`{"order_id":%q,"status":"CANCELLING","currency":"JPY",
			"total_minor":3100,"reason":"payment_expired","lines":[]}`, cancelled)),
			"order_cancelled", "Your order " + cancelled + " has been cancelled", []string{"We did not receive your payment before the deadline."}},
	}
	for _, c := range events {
		s.mustDeliver(t, c.e)
		m := s.waitMail(t, withMessageID(messageID(c.e.ID, c.template)))
		if subject, err := m.Subject(); err != nil || subject != c.subject {
			t.Errorf("%s: subject %q (%v), want %q", c.e.Type, subject, err, c.subject)
		}
		text, _ := m.Part("text/plain")
		html, _ := m.Part("text/html")
		for _, want := range c.shows {
			if !strings.Contains(text, want) || !strings.Contains(html, want) {
				t.Errorf("%s: %q missing from the text or HTML part:\n%s\n%s", c.e.Type, want, text, html)
			}
		}
		if m.To[0] != "bob@example.com" {
			t.Errorf("%s: sent to %q", c.e.Type, m.To)
		}
	}
	if n := len(s.mail.Messages()); n != len(events) {
		t.Errorf("%d e-mails, want %d", n, len(events))
	}
	if ns := s.notifications(t, shipped); len(ns) != 4 {
		t.Errorf("notifications of %s: %+v, want 4", shipped, ns)
	}
}

// TestPaymentPendingBeforeOrderCreated: a payment's events are not ordered against its order's,
// so the slip may arrive before the address: it is early (409) until order.created is applied.
func TestPaymentPendingBeforeOrderCreated(t *testing.T) {
	s := startSystem(t)
	orderID := uuid.NewString()
	slip := pending(orderID, uuid.NewString())
	if status, outcome := s.deliver(t, slip); status != http.StatusConflict {
		t.Fatalf("payment.pending before order.created: %d %s, want 409", status, outcome)
	}
	if n := len(s.notifications(t, orderID)); n != 0 || len(s.mail.Messages()) != 0 {
		t.Fatalf("an early event recorded %d notifications and sent %d e-mails", n, len(s.mail.Messages()))
	}
	s.mustDeliver(t, created(orderID, "ali@example.com", "ja"))
	if outcome := s.mustDeliver(t, slip); outcome != outboxlib.OutcomeApplied {
		t.Errorf("payment.pending after order.created: %s, want applied", outcome)
	}
	m := s.waitMail(t, withMessageID(messageID(slip.ID, "payment_instructions")))
	if subject, _ := m.Subject(); subject != "お支払い方法のご案内 (注文番号 "+orderID+")" {
		t.Errorf("subject %q", subject)
	}
	if text, _ := m.Part("text/plain"); !strings.Contains(text, "ローソン") || !strings.Contains(text, "2025年3月14日(金) 23:59") {
		t.Errorf("text part:\n%s", text)
	}
}

// TestNoEmailWithoutAnAddress: an order placed without an e-mail gets no notification at all.
func TestNoEmailWithoutAnAddress(t *testing.T) {
	s := startSystem(t)
	orderID := uuid.NewString()
	s.mustDeliver(t, created(orderID, "", "ja"))
	if outcome := s.mustDeliver(t, confirmed(orderID)); outcome != outboxlib.OutcomeApplied {
		t.Errorf("order.confirmed: %s, want applied", outcome)
	}
	if ns := s.notifications(t, orderID); len(ns) != 0 {
		t.Errorf("notifications %+v, want none", ns)
	}
	if n := len(s.mail.Messages()); n != 0 {
		t.Errorf("%d e-mails, want none", n)
	}
}

// TestBounce: a 5xx to RCPT TO makes the notification BOUNCED, final: the delivery is answered
// 200 and nothing, neither a redelivery nor the sweep, tries again.
func TestBounce(t *testing.T) {
	s := startSystem(t)
	orderID := uuid.NewString()
	s.mail.RejectRecipient("typo@example.con", 550)
	s.mustDeliver(t, created(orderID, "typo@example.con", "en"))
	conf := confirmed(orderID)
	s.mustDeliver(t, conf)
	n := s.only(t, orderID)
	if n.Status != "BOUNCED" || n.Attempts != 1 || !strings.Contains(n.LastError, "550") {
		t.Errorf("notification %+v, want BOUNCED after 1 attempt with the 550", n)
	}
	s.mustDeliver(t, conf)
	status, body := s.do(t, http.MethodPost, "/admin/sweep", s.token(t, operatorEmail))
	if status != http.StatusOK || !strings.Contains(string(body), `"resumed":0`) {
		t.Errorf("sweep: %d %s, want nothing resumed", status, body)
	}
	if n := s.only(t, orderID); n.Attempts != 1 || n.Status != "BOUNCED" {
		t.Errorf("after a redelivery and a sweep: %+v, want still 1 attempt", n)
	}
	if got := s.metric(t, `notifications_sent_total{result="bounced",template="order_confirmed"}`); got != "1" {
		t.Errorf("bounced count %q, want 1", got)
	}
	if n := len(s.mail.Messages()); n != 0 {
		t.Errorf("%d e-mails accepted, want none", n)
	}
}

// TestTemporaryFailureIsRetried: a 4xx defers the e-mail (the delivery is answered 200: the intent
// is recorded and only its back-off remains) and the sweep sends it on a later attempt, once.
func TestTemporaryFailureIsRetried(t *testing.T) {
	s := startSystem(t)
	orderID := uuid.NewString()
	conf := s.confirmUnsent(t, orderID, func() { s.mail.RejectRecipient("ali@example.com", 451) })
	if n := s.only(t, orderID); n.Status != "PENDING" || n.Attempts != 1 || !strings.Contains(n.LastError, "451") {
		t.Fatalf("after a 451: %+v, want PENDING after 1 attempt", n)
	}
	s.mail.RejectRecipient("ali@example.com", 0)
	s.sweepUntil(t, "a sweep that sends the e-mail", sent)
	s.mustDeliver(t, conf) // a late redelivery finds it sent
	if n := s.only(t, orderID); n.Status != "SENT" || n.Attempts != 2 || n.LastError != "" {
		t.Errorf("after the retry: %+v, want SENT after 2 attempts", n)
	}
	if n := len(s.mail.Messages()); n != 1 {
		t.Errorf("%d e-mails, want 1", n)
	}
	if got := s.metric(t, `notifications_sent_total{result="retry",template="order_confirmed"}`); got != "1" {
		t.Errorf("retry count %q, want 1", got)
	}
}

// TestBackoffDoesNotHoldTheQueue: while one address greylists (4xx), its e-mail waits out its
// back-off in Spanner and its delivery is answered 200, so the queue (which Cloud Tasks would slow
// down for every 503) goes on: another customer's e-mail, delivered next, is sent at once.
func TestBackoffDoesNotHoldTheQueue(t *testing.T) {
	s := startSystem(t)
	greylisted := uuid.NewString()
	s.confirmUnsent(t, greylisted, func() { s.mail.RejectRecipient("ali@example.com", 451) })
	other := uuid.NewString()
	s.mustDeliver(t, created(other, "bob@example.com", "en"))
	conf := confirmed(other)
	if status, outcome := s.deliver(t, conf); status != http.StatusOK || outcome != outboxlib.OutcomeApplied {
		t.Fatalf("the other order's order.confirmed: %d %s, want 200 applied", status, outcome)
	}
	if n := s.only(t, other); n.Status != "SENT" || n.Attempts != 1 {
		t.Errorf("the other e-mail: %+v, want SENT at its first attempt", n)
	}
	if n := s.only(t, greylisted); n.Status != "PENDING" {
		t.Errorf("the greylisted e-mail: %+v, want PENDING (its back-off runs)", n)
	}
}

// TestSweepResumes: an e-mail the request path left unsent (a refused connection) is sent by the
// operators' sweep, with the same Message-ID.
func TestSweepResumes(t *testing.T) {
	s := startSystem(t)
	orderID := uuid.NewString()
	conf := s.confirmUnsent(t, orderID, func() { s.mail.Refuse(1) })
	s.sweepUntil(t, "a sweep that sends the e-mail", sent)
	s.waitMail(t, withMessageID(messageID(conf.ID, "order_confirmed")))
	if n := s.only(t, orderID); n.Status != "SENT" || n.Attempts != 2 {
		t.Errorf("after the sweep: %+v, want SENT after 2 attempts", n)
	}
	// The event's own redelivery now finds it sent.
	s.mustDeliver(t, conf)
	if n := len(s.mail.Messages()); n != 1 {
		t.Errorf("%d e-mails, want 1", n)
	}
}

// TestRetriesExhausted: an e-mail that fails temporarily at every attempt is FAILED after
// NOTIFICATIONS_MAX_ATTEMPTS (3 here; the sweep makes the attempts after the first), final.
func TestRetriesExhausted(t *testing.T) {
	s := startSystem(t)
	orderID := uuid.NewString()
	conf := s.confirmUnsent(t, orderID, func() { s.mail.Refuse(-1) })
	s.sweepUntil(t, "sweeps until the e-mail fails", func(rep api.Sweep) bool { return rep.Failed == 1 })
	if n := s.only(t, orderID); n.Status != "FAILED" || n.Attempts != 3 || !strings.Contains(n.LastError, "421") {
		t.Errorf("notification %+v, want FAILED after 3 attempts", n)
	}
	s.mail.Refuse(0)
	s.mustDeliver(t, conf)
	if n := s.only(t, orderID); n.Attempts != 3 || len(s.mail.Messages()) != 0 {
		t.Errorf("a FAILED notification was tried again: %+v", n)
	}
	for result, want := range map[string]string{"failed": "1", "retry": "2"} {
		if got := s.metric(t, `notifications_sent_total{result="`+result+`",template="order_confirmed"}`); got != want {
			t.Errorf("%s count %q, want %s", result, got, want)
		}
	}
}

// TestResendAfterCrashKeepsTheMessageID is the drill of faults.NotificationsAfterSend: the service,
// run as its own process, dies after the mail server accepted the e-mail and before it is marked
// SENT; the sweep, in a new process, sends it again with the same Message-ID (and the same bytes)
// once the dead attempt's lease has run out (2 × SMTP_TIMEOUT here), then marks it.
func TestResendAfterCrashKeepsTheMessageID(t *testing.T) {
	s := newSystem(t)
	var vars []string
	for k, v := range s.vars("SMTP_TIMEOUT", "1s") {
		vars = append(vars, k+"="+v)
	}
	crashing := platformtest.StartMain(t, append(vars, faults.EnvVar+"="+faults.NotificationsAfterSend)...)
	s.url = platformtest.StartedURL(t, crashing.Logs)
	orderID := uuid.NewString()
	s.mustDeliver(t, created(orderID, "ali@example.com", "ja"))
	conf := confirmed(orderID)
	if status, outcome, err := s.post(conf, s.token(t, relayEmail)); err == nil {
		t.Fatalf("order.confirmed answered %d %s; want the process to die after the send (is faults.Hit(%q) called?)",
			status, outcome, faults.NotificationsAfterSend)
	}
	first := s.waitMail(t, withMessageID(messageID(conf.ID, "order_confirmed")))
	row, err := notificationsdb.ReadNotification(context.Background(), s.client.Single(), conf.ID, "order_confirmed")
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != "PENDING" || row.Attempts != 0 {
		t.Fatalf("after the crash: %s with %d attempts, want PENDING, 0 (the acceptance is not recorded)", row.Status, row.Attempts)
	}

	restarted := platformtest.StartMain(t, vars...)
	s.url = platformtest.StartedURL(t, restarted.Logs)
	if outcome := s.mustDeliver(t, conf); outcome != outboxlib.OutcomeDuplicate {
		t.Errorf("redelivery before the lease ran out: %s, want duplicate", outcome)
	}
	s.sweepUntil(t, "a sweep that resends the e-mail", sent)
	if outcome := s.mustDeliver(t, conf); outcome != outboxlib.OutcomeDuplicate {
		t.Errorf("redelivery: %s, want duplicate (the event was applied before the crash)", outcome)
	}
	msgs := s.mail.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d e-mails, want 2: the one before the crash and its resend", len(msgs))
	}
	if msgs[1].MessageID() != first.MessageID() || !bytes.Equal(msgs[1].Raw, first.Raw) {
		t.Errorf("the resend differs:\n%s\nfirst:\n%s", msgs[1].Raw, first.Raw)
	}
	if n := s.only(t, orderID); n.Status != "SENT" || n.Attempts != 1 {
		t.Errorf("after the resend: %+v, want SENT after 1 attempt", n)
	}
}

func TestOperatorEndpoints(t *testing.T) {
	s := startSystem(t)
	op := s.token(t, operatorEmail)
	for _, c := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"list without a token", http.MethodGet, "/admin/notifications?order_id=" + uuid.NewString(), "", http.StatusUnauthorized},
		{"list with the relay's token", http.MethodGet, "/admin/notifications?order_id=" + uuid.NewString(), s.token(t, relayEmail), http.StatusForbidden},
		{"sweep without a token", http.MethodPost, "/admin/sweep", "", http.StatusUnauthorized},
		{"no order id", http.MethodGet, "/admin/notifications", op, http.StatusBadRequest},
		{"not an order id", http.MethodGet, "/admin/notifications?order_id=nope", op, http.StatusBadRequest},
		{"an order without notifications", http.MethodGet, "/admin/notifications?order_id=" + uuid.NewString(), op, http.StatusOK},
		{"operator's sweep", http.MethodPost, "/admin/sweep", op, http.StatusOK},
		{"dead letters", http.MethodGet, "/admin/deadletters", op, http.StatusOK},
	} {
		status, body := s.do(t, c.method, c.path, c.token)
		if status != c.want {
			t.Errorf("%s: %s %s = %d %s, want %d", c.name, c.method, c.path, status, body, c.want)
		}
	}
}

// TestEventAnswers: what the consumer answers for events the service cannot mail (yet, or ever).
func TestEventAnswers(t *testing.T) {
	s := startSystem(t)
	unknown := uuid.NewString()
	noSlip := pending(unknown, uuid.NewString())
	noSlip.Payload = json.RawMessage(fmt.Sprintf(`{"payment_id":"p-1","order_id":%q,"status":"PENDING","amount_minor":1,"currency":"JPY"}`, unknown))
	// An order event whose predecessor the relay says is none, for an order without a contact: the
	// library's order check lets it through, the service defers it.
	orphan := confirmed(unknown)
	orphan.predecessor = 0
	for _, c := range []struct {
		name    string
		e       event
		status  int
		outcome string
	}{
		{"order event without order_id", orderEvent("order.shipped", unknown, 1, 0, `{"status":"SHIPPED"}`), http.StatusOK, outboxlib.OutcomeDeadLettered},
		{"payload of the wrong shape", orderEvent("order.cancelled", unknown, 1, 0, `{"order_id":7}`), http.StatusOK, outboxlib.OutcomeDeadLettered},
		{"payment.pending without a slip", noSlip, http.StatusOK, outboxlib.OutcomeDeadLettered},
		{"order event before its order.created", orphan, http.StatusConflict, ""},
		{"event type nobody routes here", orderEvent("order.completed", unknown, 1, 0, `{}`), http.StatusOK, outboxlib.OutcomeDeadLettered},
	} {
		if status, outcome := s.deliver(t, c.e); status != c.status || outcome != c.outcome {
			t.Errorf("%s: %d %q, want %d %q", c.name, status, outcome, c.status, c.outcome)
		}
	}
	if n := len(s.mail.Messages()); n != 0 {
		t.Errorf("%d e-mails, want none", n)
	}
}
