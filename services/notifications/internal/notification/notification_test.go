package notification

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	t0     = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	policy = RetryPolicy{MaxAttempts: 3, Backoff: time.Minute, MaxBackoff: 3 * time.Minute}
)

func pending(t *testing.T) *Notification {
	t.Helper()
	n, err := New("e-1", "order.confirmed", "order_confirmed", "o-1", "ali@example.com", Japanese,
		Content{Subject: "s", Text: "t", HTML: "<p>h</p>"}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func withStatus(t *testing.T, st Status, attempts int64) *Notification {
	t.Helper()
	s := pending(t).Snapshot()
	s.Status, s.Attempts = st, attempts
	n, err := Restore(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTransitions tries every action from every status.
func TestTransitions(t *testing.T) {
	actions := map[string]func(n *Notification) error{
		"sent":     func(n *Notification) error { return n.MarkSent(t0, "250 ok") },
		"bounced":  func(n *Notification) error { return n.MarkBounced("550 no such user") },
		"deferred": func(n *Notification) error { return n.MarkDeferred("451 later", t0, policy) },
	}
	for _, c := range []struct {
		from     Status
		attempts int64
		action   string
		want     Status // "" = ErrIllegalTransition
	}{
		{Pending, 0, "sent", Sent},
		{Pending, 0, "bounced", Bounced},
		{Pending, 0, "deferred", Pending},
		{Pending, 1, "deferred", Pending},
		{Pending, 2, "deferred", Failed}, // the third attempt of three
		{Pending, 2, "sent", Sent},
		{Sent, 1, "sent", ""},
		{Sent, 1, "bounced", ""},
		{Sent, 1, "deferred", ""},
		{Bounced, 1, "sent", ""},
		{Bounced, 1, "bounced", ""},
		{Bounced, 1, "deferred", ""},
		{Failed, 3, "sent", ""},
		{Failed, 3, "bounced", ""},
		{Failed, 3, "deferred", ""},
	} {
		n := withStatus(t, c.from, c.attempts)
		err := actions[c.action](n)
		if c.want == "" {
			if !errors.Is(err, ErrIllegalTransition) || n.Status() != c.from || n.Attempts() != c.attempts || n.Changed() {
				t.Errorf("%s (%d attempts) %s: err %v, now %s with %d attempts; want ErrIllegalTransition and no change",
					c.from, c.attempts, c.action, err, n.Status(), n.Attempts())
			}
			continue
		}
		if err != nil || n.Status() != c.want || n.Attempts() != c.attempts+1 || !n.Changed() {
			t.Errorf("%s (%d attempts) %s: err %v, now %s with %d attempts; want %s with %d", c.from, c.attempts, c.action,
				err, n.Status(), n.Attempts(), c.want, c.attempts+1)
		}
		if n.Status().Final() != n.NextAttemptAt().IsZero() {
			t.Errorf("%s (%d attempts) %s: status %s with next attempt %v", c.from, c.attempts, c.action, n.Status(), n.NextAttemptAt())
		}
	}
}

func TestMarkSentKeepsTheReply(t *testing.T) {
	n := pending(t)
	if err := n.MarkDeferred("451 later", t0, policy); err != nil {
		t.Fatal(err)
	}
	if err := n.MarkSent(t0.Add(time.Hour), "2.0.0 queued as ABC"); err != nil {
		t.Fatal(err)
	}
	s := n.Snapshot()
	if s.ServerReply != "2.0.0 queued as ABC" || !s.SentAt.Equal(t0.Add(time.Hour)) || s.LastError != "" {
		t.Errorf("after MarkSent: %+v", s)
	}
}

func TestBackoffDoublesToItsCap(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 10, Backoff: time.Minute, MaxBackoff: 5 * time.Minute}
	var got []time.Duration
	for i := int64(1); i <= 5; i++ {
		got = append(got, p.Delay(i))
	}
	if diff := cmp.Diff([]time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}, got); diff != "" {
		t.Errorf("delays (-want +got):\n%s", diff)
	}
	n := pending(t)
	n.MarkDeferred("451", t0, p)
	n.MarkDeferred("451", t0, p)
	if want := t0.Add(2 * time.Minute); !n.NextAttemptAt().Equal(want) {
		t.Errorf("next attempt after two failures at t0: %v, want %v", n.NextAttemptAt(), want)
	}
}

func TestDue(t *testing.T) {
	n := pending(t) // created at t0 with its first attempt leased until t0+1m
	if n.Due(t0) || n.Due(t0.Add(59*time.Second)) || !n.Due(t0.Add(time.Minute)) {
		t.Errorf("a new notification leased until %v: want due from then on only", n.NextAttemptAt())
	}
	n.MarkDeferred("451", t0, policy)
	if n.Due(t0.Add(59*time.Second)) || !n.Due(t0.Add(time.Minute)) {
		t.Errorf("after a failure at t0, due at %v: want due from then on only", n.NextAttemptAt())
	}
	n.MarkSent(t0.Add(time.Minute), "")
	if n.Due(t0.Add(time.Hour)) {
		t.Error("a sent notification is due")
	}
}

// Of two senders that find a notification due, the one whose claim commits first holds it: the
// second one's claim, made on the stored state the first one left, is refused.
func TestClaimHoldsTheNotification(t *testing.T) {
	n := pending(t)
	at := t0.Add(time.Minute)
	if err := n.Claim(t0, at.Add(time.Minute)); !errors.Is(err, ErrNotDue) {
		t.Fatalf("claim inside the first attempt's lease: %v, want ErrNotDue", err)
	}
	until := at.Add(time.Minute + 1500*time.Nanosecond)
	if err := n.Claim(at, until); err != nil {
		t.Fatalf("claim of a due notification: %v", err)
	}
	if want := until.Truncate(time.Microsecond); !n.NextAttemptAt().Equal(want) || !n.Changed() {
		t.Errorf("after the claim: next attempt %v (changed %v), want %v, changed", n.NextAttemptAt(), n.Changed(), want)
	}
	if err := n.Claim(at.Add(time.Second), at.Add(2*time.Minute)); !errors.Is(err, ErrNotDue) {
		t.Errorf("a second claim during the lease: %v, want ErrNotDue", err)
	}
	if err := n.Claim(until, until.Add(time.Minute)); err != nil {
		t.Errorf("a claim once the lease has run out: %v", err)
	}
	n.MarkSent(until, "250 ok")
	if err := n.Claim(until.Add(time.Hour), until.Add(2*time.Hour)); !errors.Is(err, ErrNotDue) {
		t.Errorf("a claim of a sent notification: %v, want ErrNotDue", err)
	}
}

func TestNewRefusesMissingParts(t *testing.T) {
	_, err := New("e-1", "order.confirmed", "order_confirmed", "", "ali@example.com", English, Content{Subject: "s"}, t0)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "HTML body, order id, text body") {
		t.Errorf("New without an order id and bodies: %v", err)
	}
}

func TestMessageIDIsStable(t *testing.T) {
	a, b := MessageID("e-1", "order_confirmed"), MessageID("e-1", "order_confirmed")
	if a != b || a != "<e-1.order_confirmed@notifications.spanmart>" {
		t.Errorf("MessageID = %q, %q", a, b)
	}
	if MessageID("e-1", "order_shipped") == a || MessageID("e-2", "order_confirmed") == a {
		t.Error("two keys share a Message-ID")
	}
}

func TestParseLanguage(t *testing.T) {
	for in, want := range map[string]Language{"ja": Japanese, "en": English, "EN-us": English, "ja-JP": Japanese, "": Japanese, "fr": Japanese, " en ": English} {
		if got := ParseLanguage(in); got != want {
			t.Errorf("ParseLanguage(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestRecipient(t *testing.T) {
	for _, c := range []struct {
		email   string
		want    string
		ok, bad bool
	}{
		{"ali@example.com", "ali@example.com", true, false},
		{"", "", false, false},
		{"   ", "", false, false},
		{"not an address", "", false, true},
		{"Ali <ali@example.com>", "", false, true},
		{"ali@example.com\r\nBcc: eve@example.com", "", false, true},
		{"ali@example.com, eve@example.com", "", false, true},
	} {
		got, ok, err := Contact{OrderID: "o-1", Email: c.email}.Recipient()
		if got != c.want || ok != c.ok || (err != nil) != c.bad || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("Recipient(%q) = %q, %v, %v; want %q, %v, error %v", c.email, got, ok, err, c.want, c.ok, c.bad)
		}
	}
}
