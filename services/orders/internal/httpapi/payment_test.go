package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/services/orders/api"
	"github.com/spanmart/spanmart/services/orders/internal/order"
	"github.com/spanmart/spanmart/services/orders/internal/orderstest"
)

// body is a one-line order with the given members after customer_id and lines, e.g.
// `"payment": {"method": "wallet"}`.
func body(members string) string {
	b := `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 1}]`
	if members != "" {
		b += ", " + members
	}
	return b + "}"
}

// TestPlaceOrderEveryMethod places an order with every method (and every konbini store) through
// the handler and checks the response, the row and order.created (which carries no payment).
func TestPlaceOrderEveryMethod(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name    string
		members string
		email   string
		want    api.Payment
	}{
		{"card", `"payment": {"method": "card", "payment_method": "pm_card_visa"}`, "", api.Payment{Method: "card", PaymentMethod: "pm_card_visa"}},
		{"card with email", `"email": "ali@example.com", "payment": {"method": "card", "payment_method": "pm_1NnLz2AbCdEfGh"}`, "ali@example.com", api.Payment{Method: "card", PaymentMethod: "pm_1NnLz2AbCdEfGh"}},
		{"wallet", `"payment": {"method": "wallet"}`, "", api.Payment{Method: "wallet"}},
		{"wallet null members", `"email": null, "payment": {"method": "wallet", "store": null}`, "", api.Payment{Method: "wallet"}},
		{"bank transfer", `"email": "ali@example.com", "payment": {"method": "bank_transfer"}`, "ali@example.com", api.Payment{Method: "bank_transfer"}},
	}
	for _, store := range order.KonbiniStores() {
		tests = append(tests, struct {
			name    string
			members string
			email   string
			want    api.Payment
		}{"konbini " + store, `"email": "ali@example.com", "payment": {"method": "konbini", "store": "` + store + `"}`, "ali@example.com", api.Payment{Method: "konbini", Store: store}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := f.do(t, http.MethodPost, "/v1/orders", "key-"+tt.name, body(tt.members))
			if resp.status != http.StatusCreated {
				t.Fatalf("POST = %d %s", resp.status, resp.body)
			}
			got := decode[api.Order](t, resp.body)
			if diff := cmp.Diff(&tt.want, got.Payment); diff != "" || got.Email != tt.email {
				t.Errorf("payment (-want +got):\n%s\nemail %q, want %q", diff, got.Email, tt.email)
			}
			g := decode[api.Order](t, f.do(t, http.MethodGet, "/v1/orders/"+got.ID, "", "").body)
			if diff := cmp.Diff(got.Payment, g.Payment); diff != "" || g.Email != tt.email {
				t.Errorf("GET payment (-post +get):\n%s", diff)
			}
		})
	}
	s := orderstest.Read(t, f.client)
	for _, e := range s.Outbox {
		if p := orderstest.Payload(t, e); p["payment"] != nil {
			t.Errorf("order.created carries the payment: %v", p)
		}
	}
}

// TestPaymentValidation: every method with every field it does not take, missing and malformed
// details, unknown fields, missing payment and bad e-mail addresses, through the handler. Each
// invalid request gets one 400 problem listing every problem, like the rest of the request's
// validation, and writes nothing.
func TestPaymentValidation(t *testing.T) {
	f := newFixture(t)
	const email = `"email": "ali@example.com", `
	tests := []struct {
		name    string
		members string // after customer_id and a valid line
		raw     string // the whole body instead
		status  int
		errors  []string // substrings of the problem's errors, in order; nil for a malformed body
		detail  string   // for a malformed body: a substring of the detail
	}{
		{name: "no payment", members: "", status: 400, errors: []string{"payment is required"}},
		{name: "null payment", members: `"payment": null`, status: 400, errors: []string{"payment is required"}},
		{name: "empty payment", members: `"payment": {}`, status: 400, errors: []string{"payment.method is required (one of card, wallet, konbini, bank_transfer)"}},
		{name: "unknown method", members: `"payment": {"method": "cash"}`, status: 400, errors: []string{`payment.method "cash" is not one of card, wallet, konbini, bank_transfer`}},
		{name: "method in capitals", members: `"payment": {"method": "CARD", "payment_method": "pm_card_visa"}`, status: 400, errors: []string{`payment.method "CARD" is not one of`}},
		{name: "payment not an object", members: `"payment": "card"`, status: 400, detail: "not a valid order"},
		{name: "method not a string", members: `"payment": {"method": 1}`, status: 400, detail: "payment.method is not a string"},
		{name: "store not a string", members: `"payment": {"method": "konbini", "store": 7}`, status: 400, detail: "payment.store is not a string"},
		{name: "unknown top-level field", members: `"payment": {"method": "wallet"}, "pay": {}`, status: 400, detail: "unknown field"},

		{name: "card without payment_method", members: `"payment": {"method": "card"}`, status: 400, errors: []string{"payment.payment_method is required for method card"}},
		{name: "card with empty payment_method", members: `"payment": {"method": "card", "payment_method": ""}`, status: 400, errors: []string{"payment.payment_method is required"}},
		{name: "card with a token", members: `"payment": {"method": "card", "payment_method": "tok_visa"}`, status: 400, errors: []string{"not a Stripe PaymentMethod id"}},
		{name: "card with a card number", members: `"payment": {"method": "card", "payment_method": "4242 4242 4242 4242"}`, status: 400, errors: []string{"not a Stripe PaymentMethod id"}},
		{name: "card id too long", members: `"payment": {"method": "card", "payment_method": "pm_` + strings.Repeat("x", 253) + `"}`, status: 400, errors: []string{"longer than 255 characters"}},
		{name: "card with store", members: `"payment": {"method": "card", "payment_method": "pm_card_visa", "store": "lawson"}`, status: 400, errors: []string{"payment.store does not belong to method card"}},
		{name: "card with unknown fields", members: `"payment": {"method": "card", "payment_method": "pm_card_visa", "number": "4242", "cvc": 123}`, status: 400, errors: []string{"payment.cvc is not a known field", "payment.number is not a known field"}},

		{name: "wallet with store", members: `"payment": {"method": "wallet", "store": "lawson"}`, status: 400, errors: []string{"payment.store does not belong to method wallet (it takes no other field)"}},
		{name: "wallet with payment_method", members: `"payment": {"method": "wallet", "payment_method": "pm_card_visa"}`, status: 400, errors: []string{"payment.payment_method does not belong to method wallet"}},
		{name: "wallet with unknown field", members: `"payment": {"method": "wallet", "provider": "paypay"}`, status: 400, errors: []string{"payment.provider is not a known field"}},

		{name: "konbini without store", members: email + `"payment": {"method": "konbini"}`, status: 400, errors: []string{"payment.store is required for method konbini (one of lawson, family-mart, ministop, daily-yamazaki, seicomart, seven-eleven)"}},
		{name: "konbini with unknown store", members: email + `"payment": {"method": "konbini", "store": "FamilyMart"}`, status: 400, errors: []string{`payment.store "FamilyMart" is not one of`}},
		{name: "konbini with payment_method", members: email + `"payment": {"method": "konbini", "store": "lawson", "payment_method": "pm_card_visa"}`, status: 400, errors: []string{"payment.payment_method does not belong to method konbini (it takes store)"}},
		{name: "konbini without email", members: `"payment": {"method": "konbini", "store": "lawson"}`, status: 400, errors: []string{"email is required for payment method konbini (the payment slip is e-mailed)"}},
		{name: "konbini with empty email", members: `"email": "", "payment": {"method": "konbini", "store": "lawson"}`, status: 400, errors: []string{"email is required for payment method konbini"}},

		{name: "bank transfer without email", members: `"payment": {"method": "bank_transfer"}`, status: 400, errors: []string{"email is required for payment method bank_transfer"}},
		{name: "bank transfer with store", members: email + `"payment": {"method": "bank_transfer", "store": "lawson"}`, status: 400, errors: []string{"payment.store does not belong to method bank_transfer"}},
		{name: "bank transfer with payment_method", members: email + `"payment": {"method": "bank_transfer", "payment_method": "pm_card_visa"}`, status: 400, errors: []string{"payment.payment_method does not belong to method bank_transfer"}},

		{name: "bad email", members: `"email": "ali", "payment": {"method": "wallet"}`, status: 400, errors: []string{"email is not a valid e-mail address"}},
		{name: "email with a name", members: `"email": "Ali <ali@example.com>", "payment": {"method": "wallet"}`, status: 400, errors: []string{"email is not a valid e-mail address"}},
		{name: "two emails", members: `"email": "ali@example.com, bob@example.com", "payment": {"method": "card", "payment_method": "pm_card_visa"}`, status: 400, errors: []string{"email is not a valid e-mail address"}},
		{name: "email too long", members: `"email": "` + strings.Repeat("a", 64) + "@" + strings.Repeat("b", 186) + `.com", "payment": {"method": "wallet"}`, status: 400, errors: []string{"email is longer than 254 characters"}},
		{name: "email not a string", members: `"email": 1, "payment": {"method": "wallet"}`, status: 400, detail: "not a valid order"},

		// Every problem at once, the lines' included, in the order the request reads.
		{
			name:    "everything wrong",
			members: `"email": "nope", "payment": {"method": "konbini", "payment_method": "pm_x", "cvc": "1"}`,
			status:  400,
			errors: []string{
				"payment.cvc is not a known field", "payment.payment_method does not belong to method konbini",
				"payment.store is required for method konbini", "email is not a valid e-mail address",
			},
		},
		{
			name:   "lines and payment wrong",
			raw:    `{"customer_id": "cust-1", "lines": [{"sku": "A1", "quantity": 0}], "payment": {"method": "wallet", "store": "lawson"}}`,
			status: 400,
			errors: []string{"quantity 0 is not in 1..100", "payment.store does not belong to method wallet"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.raw
			if b == "" {
				b = body(tt.members)
			}
			r := f.do(t, http.MethodPost, "/v1/orders", "k", b)
			if tt.errors == nil {
				checkProblem(t, r, tt.status, tt.detail)
				return
			}
			p := checkProblem(t, r, tt.status, tt.errors[0])
			if len(p.Errors) != len(tt.errors) {
				t.Fatalf("errors = %q, want %d matching %q", p.Errors, len(tt.errors), tt.errors)
			}
			for i, want := range tt.errors {
				if !strings.Contains(p.Errors[i], want) {
					t.Errorf("errors[%d] = %q, want it to contain %q", i, p.Errors[i], want)
				}
			}
		})
	}
	if s := orderstest.Read(t, f.client); len(s.Orders) != 0 || len(s.Outbox) != 0 || len(s.Keys) != 0 {
		t.Errorf("rejected requests wrote %d orders, %d outbox rows, %d keys", len(s.Orders), len(s.Outbox), len(s.Keys))
	}
}
