package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/spanmart/spanmart/e2e/harness"
	"github.com/spanmart/spanmart/emulator/authemu"
)

// TestCustomersOnTheRealStack: the orders process, as the stacks configure it, takes only its
// customers' ID tokens on the order API. A request without one, or with a forged, expired or
// foreign token, or an operator's Google token, is a 401 and stores nothing; another customer's
// order is a 404 exactly like an unknown order's, and the order is untouched; an operator reads
// any order on /admin/orders/{id}, the customer's own representation.
func TestCustomersOnTheRealStack(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	ctx := context.Background()
	id := placeOrder(t, s, "A1", 1)
	owner := ownerOf(t, id)
	// Confirmed, the order is at rest: orders writes nothing more of its own accord.
	harness.Eventually(t, "the order is confirmed", func() bool { return getOrder(t, s, id).Status == "CONFIRMED" })
	rows := func() [3]int64 {
		return [3]int64{
			count(t, s, "orders", "SELECT COUNT(*) FROM Orders", nil),
			count(t, s, "orders", "SELECT COUNT(*) FROM IdempotencyKeys", nil),
			count(t, s, "orders", "SELECT COUNT(*) FROM OutboxEvents", nil),
		}
	}
	before := rows()

	mint := func(c authemu.Claims, forge bool) string {
		t.Helper()
		c.Subject = owner
		f := s.Customers.Mint
		if forge {
			f = s.Customers.Forge
		}
		tok, err := f(c)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	operator, err := s.OperatorToken(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	body := orderRequest(owner, "A1", 1)
	for name, auth := range map[string]string{
		"no token":         "",
		"forged":           mint(authemu.Claims{}, true),
		"expired":          mint(authemu.Claims{IssuedAt: time.Now().Add(-2 * time.Hour)}, false),
		"another audience": mint(authemu.Claims{Audience: "another-project"}, false),
		"operator's token": "Bearer " + operator, // Google's, for orders' URL: no customer's
	} {
		for _, route := range []struct {
			method, path string
			body         any
		}{
			{http.MethodPost, "/v1/orders", body},
			{http.MethodGet, "/v1/orders/" + id, nil},
			{http.MethodPost, "/v1/orders/" + id + "/cancel", nil},
		} {
			r, err := s.Do(ctx, route.method, "orders", route.path, route.body, "Authorization", auth, "Idempotency-Key", uuid.NewString())
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: %s %s = %s (WWW-Authenticate %q), want 401", name, route.method, route.path, r, r.Header.Get("WWW-Authenticate"))
			}
		}
	}
	if after := rows(); after != before {
		t.Errorf("refused requests changed (orders, keys, outbox) from %v to %v", before, after)
	}

	// Another customer: 404, exactly the answer to an order that does not exist.
	other, err := asCustomer(ctx, s, "someone-else")
	if err != nil {
		t.Fatal(err)
	}
	unknown := uuid.NewString()
	normalize := func(r *harness.Response, orderID string) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(strings.ReplaceAll(string(r.Body), orderID, "ID")), &m); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		delete(m, "request_id")
		return m
	}
	for _, suffix := range []string{"", "/cancel"} {
		method := http.MethodGet
		if suffix != "" {
			method = http.MethodPost
		}
		foreign, err := s.Do(ctx, method, "orders", "/v1/orders/"+id+suffix, nil, "Authorization", other, "Idempotency-Key", uuid.NewString())
		if err != nil {
			t.Fatal(err)
		}
		none, err := s.Do(ctx, method, "orders", "/v1/orders/"+unknown+suffix, nil, "Authorization", other, "Idempotency-Key", uuid.NewString())
		if err != nil {
			t.Fatal(err)
		}
		if foreign.Status != http.StatusNotFound || none.Status != http.StatusNotFound {
			t.Fatalf("%s another's order = %s, an unknown one = %s; want 404 both", method, foreign, none)
		}
		if diff := cmp.Diff(normalize(none, unknown), normalize(foreign, id)); diff != "" {
			t.Errorf("%s: another's order and an unknown one answer differently (-unknown +another's):\n%s", method, diff)
		}
	}
	if after := rows(); after != before {
		t.Errorf("another customer's requests changed (orders, keys, outbox) from %v to %v", before, after)
	}

	// The operator's read is the customer's representation.
	mine := customerDo(t, s, id, http.MethodGet, "/v1/orders/"+id)
	admin, err := s.AdminDo(ctx, http.MethodGet, "orders", "/admin/orders/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if admin.Status != http.StatusOK || string(admin.Body) != string(mine.Body) {
		t.Errorf("GET /admin/orders/%s = %s; the customer's = %s", id, admin, mine)
	}
}
