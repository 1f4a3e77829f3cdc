package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/spanmart/spanmart/e2e/harness"
)

// One customer's mail server greylists (451): that customer's e-mails wait out their back-off in
// Spanner, their deliveries are answered 200, and the notifications queue is never throttled (a
// 503 would pause the whole queue: the Tasks emulator models Cloud Tasks' system throttling), so
// another customer's e-mails go out at once. Once the server accepts again, the local scheduler's
// e-mail sweep sends the deferred ones, each once.
func TestGreylistedEmailDoesNotHoldTheQueue(t *testing.T) {
	s := harness.Start(t, harness.Options{Seed: paymentSeed})
	s.Mail.RejectRecipient("cust-grey@example.com", 451)
	card := pay{"method": "card", "payment_method": "pm_card_visa"}
	grey := placePaid(t, s, "cust-grey", 1, card)
	other := placePaid(t, s, "cust-other", 1, card)
	waitMail(t, s, other, "order_confirmed")
	harness.Until(t, "the greylisted customer's e-mails deferred", func() (bool, string) {
		rows, err := queryErr(s, "notifications", "SELECT Status, CAST(Attempts AS STRING) FROM Notifications WHERE OrderId = @id ORDER BY Template", map[string]any{"id": grey})
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rows {
			if r[0] != "PENDING" || r[1] == "0" {
				return false, fmt.Sprint(rows)
			}
		}
		return len(rows) > 0, fmt.Sprint(rows)
	})
	if n := notificationsThrottles(t, s); n != 0 {
		t.Errorf("the notifications queue was throttled %d times: a deferred e-mail was answered 429 or 503", n)
	}

	s.Mail.RejectRecipient("cust-grey@example.com", 0)
	waitMail(t, s, grey, "order_confirmed")
	waitSagaSettled(t, s)
	for _, r := range query(t, s, "notifications", "SELECT Template, Status, CAST(Attempts AS STRING) FROM Notifications WHERE OrderId = @id", map[string]any{"id": grey}) {
		if n, _ := strconv.Atoi(r[2]); r[1] != "SENT" || n < 2 {
			t.Errorf("e-mail %s: %s after %s attempts, want SENT by the sweep's attempt", r[0], r[1], r[2])
		}
	}
	copies := map[string]int{}
	for _, m := range s.Mail.Messages() {
		if m.Header.Get("X-Spanmart-Order") == grey {
			copies[m.Header.Get("X-Spanmart-Template")]++
		}
	}
	for tmpl, n := range copies {
		if n != 1 {
			t.Errorf("%d %s e-mails to the greylisted customer, want 1", n, tmpl)
		}
	}
	if n := notificationsThrottles(t, s); n != 0 {
		t.Errorf("the notifications queue was throttled %d times", n)
	}
}

// notificationsThrottles reads the Tasks emulator's count of system throttling pauses of the
// notifications queue.
func notificationsThrottles(t *testing.T, s *harness.Stack) int64 {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, s.TasksHTTP()+"/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Queues []struct {
			Name      string `json:"name"`
			Throttles int64  `json:"throttles"`
		} `json:"queues"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, q := range st.Queues {
		if strings.HasSuffix(q.Name, "/queues/notifications-inbox") {
			return q.Throttles
		}
	}
	t.Fatalf("no notifications-inbox among the Tasks emulator's queues %+v", st.Queues)
	return 0
}
