package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/pkg/platform"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/services/orders/internal/app"
	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// FuzzDecodeOrder: whatever body and Content-Type reach POST /v1/orders, decode and the use
// case's validation never panic. decode refuses with a 415 problem exactly when the Content-Type
// is not JSON and otherwise with a 400 problem, in the API's words; a decoded request is refused
// by PlaceOrder only with an order.ValidationError. A request PlaceOrder accepts is an order of
// exactly its lines, customer and payment, its strings plain text, and its canonical JSON (what
// the idempotency key's request hash covers) decodes back to the same request.
func FuzzDecodeOrder(f *testing.F) {
	const ct = "application/json"
	for _, seed := range []struct{ contentType, body string }{
		{ct, `{"customer_id":"c-1","email":"c1@example.com","lines":[{"sku":"A1","quantity":2}],"payment":{"method":"card","payment_method":"pm_card_visa"}}`},
		{ct, `{"customer_id":"ali","lines":[{"sku":"A1","quantity":1},{"sku":"B2","quantity":100}],"payment":{"method":"wallet"},"language":"en"}`},
		{ct, `{"customer_id":"c-2","email":"c2@example.com","lines":[{"sku":"A1","quantity":1}],"payment":{"method":"konbini","store":"lawson"}}`},
		{ct, `{"customer_id":"c-3","email":"c3@example.com","lines":[{"sku":"A1","quantity":1}],"payment":{"method":"bank_transfer"}}`},
		{ct + "; charset=utf-8", `{"customer_id":"c","lines":[{"sku":"A1","quantity":1}],"payment":{"method":"wallet","extra":{"a":[1,2]}}}`},
		{ct, `{"customer_id":"c","lines":[{"sku":"A1","quantity":1}],"payment":{"method":"card","store":"lawson","payment_method":null}}`},
		{ct, `{"Customer_ID":"c","lines":[{"sku":"A1","quantity":1}],"payment":{"method":"wallet"}}`},
		{ct, `{"customer_id":"c","customer_id":"d","lines":[],"payment":{"method":"wallet"}}`},
		{ct, `{"customer_id":"c\u0000","lines":[{"sku":"A1\u202e","quantity":0}],"payment":{"method":1}}`},
		{ct, "{\"customer_id\":\"\xff\",\"lines\":[{\"sku\":\"A1\",\"quantity\":9223372036854775808}]}"},
		{ct, `{"customer_id":"c","email":"Ali <a@example.com>","lines":[{"sku":"A1","quantity":1.5}],"payment":[]}`},
		{ct, `{"customer_id":"c","lines":[{"sku":"A1","quantity":1}],"payment":{"method":"wallet"}} {}`},
		{ct, `{"customer_id":"\udc00"`},
		{ct, ``},
		{"text/plain", `{"customer_id":"c"}`},
		{"application/json; charset=iso-8859-1", `{}`},
		{"", `null`},
	} {
		f.Add(seed.contentType, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		req, err := decodeBody(contentType, body)
		if err != nil {
			var p *platform.Problem
			if !errors.As(err, &p) {
				t.Fatalf("decode: %T %v, want a *platform.Problem", err, err)
			}
			want := http.StatusBadRequest
			if !isJSON(contentType) {
				want = http.StatusUnsupportedMediaType
			}
			if p.Status != want {
				t.Fatalf("decode with Content-Type %q: %d %s, want %d", contentType, p.Status, p.Detail, want)
			}
			checkAPIWords(t, p.Detail)
			return
		}
		if !isJSON(contentType) {
			t.Fatalf("decode accepted Content-Type %q", contentType)
		}
		// The signed-in customer is the one the request names, so that the rules of the request
		// are what refuses it (another customer's id is ErrOtherCustomer before any of them).
		customer := req.CustomerID
		if customer == "" {
			customer = "signed-in"
		}
		repo := &pricingRepository{}
		_, err = app.New(repo, nil).PlaceOrder(context.Background(), customer, "k", req, func(o *order.Order) (int, []byte, error) {
			b, err := json.Marshal(toOrder(o, nil))
			return http.StatusCreated, b, err
		})
		if err != nil {
			var ve *order.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("PlaceOrder(%+v): %v, want an order.ValidationError", req, err)
			}
			for _, p := range ve.Problems {
				checkAPIWords(t, p)
			}
			return
		}
		if req.CustomerID == "" {
			req.CustomerID = customer // what PlaceOrder does for a request without customer_id
		}
		checkPlaced(t, req, repo.placed)
	})
}

// decodeBody runs decode on a POST /v1/orders with body and contentType ("" sends none).
func decodeBody(contentType string, body []byte) (app.PlaceOrderRequest, error) {
	r := httptest.NewRequest(http.MethodPost, "/v1/orders", bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return decode(r)
}

func isJSON(contentType string) bool {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("Content-Type", contentType)
	return platform.RequireJSON(r) == nil
}

// checkPlaced holds an accepted request to the order made of it.
func checkPlaced(t *testing.T, req app.PlaceOrderRequest, o *order.Order) {
	t.Helper()
	if o == nil {
		t.Fatal("PlaceOrder succeeded without building an order")
	}
	var want []order.Line
	var total int64
	for _, l := range req.Lines {
		want = append(want, order.Line{SKU: l.SKU, Quantity: l.Quantity, UnitPriceMinor: unitPrice})
		total += l.Quantity * unitPrice
	}
	if diff := cmp.Diff(want, o.Lines()); diff != "" {
		t.Fatalf("order lines differ from the request's (-want +got):\n%s", diff)
	}
	if o.CustomerID() != req.CustomerID || o.Email() != req.Email || o.TotalMinor() != total || string(o.Payment().Method) != req.Payment.Method {
		t.Fatalf("order %s/%s/%d/%s, request %+v", o.CustomerID(), o.Email(), o.TotalMinor(), o.Payment().Method, req)
	}
	if len(req.Lines) < 1 || len(req.Lines) > order.MaxLines {
		t.Fatalf("an order of %d lines", len(req.Lines))
	}
	texts := []string{req.CustomerID, req.Email, o.Payment().Detail}
	for _, l := range req.Lines {
		if l.Quantity < order.MinQuantity || l.Quantity > order.MaxQuantity {
			t.Fatalf("line %q: quantity %d accepted", l.SKU, l.Quantity)
		}
		texts = append(texts, l.SKU)
	}
	for _, s := range texts {
		if !plainText(s) {
			t.Fatalf("accepted %q, which is not plain text", s)
		}
	}
	canonical, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := decodeBody("application/json", canonical)
	if err != nil {
		t.Fatalf("the canonical form %s of an accepted request: %v", canonical, err)
	}
	if diff := cmp.Diff(req, again); diff != "" {
		t.Fatalf("the canonical form %s decodes to another request (-first +again):\n%s", canonical, diff)
	}
	h1, err1 := app.RequestHash(req)
	h2, err2 := app.RequestHash(again)
	if err1 != nil || err2 != nil || h1 != h2 {
		t.Fatalf("request hashes %s (%v) and %s (%v) of one request", h1, err1, h2, err2)
	}
}

// plainText is what order.textProblem allows: valid UTF-8 without control or format characters.
func plainText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
		return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r)
	})
}

// checkAPIWords fails the fuzz target when a problem shows a client words of Go.
func checkAPIWords(t *testing.T, text string) {
	t.Helper()
	if w := platformtest.SpeaksGo(text); w != "" {
		t.Fatalf("problem %q speaks Go (%q)", text, w)
	}
}

// unitPrice is what pricingRepository charges for every SKU.
const unitPrice = 100

// pricingRepository is the pure half of the store's PlaceOrder: it prices every SKU at ¥100 and
// runs the placement's Build and Render as the store does inside its transaction, and stores
// nothing, so that the fuzzer reaches every rule of the use case and the domain without a database
// round trip per input. The other methods are not called on this path (nil interface: a call
// panics and fails the target).
type pricingRepository struct {
	app.Repository
	placed *order.Order
}

func (r *pricingRepository) PlaceOrder(_ context.Context, p app.Placement) (app.Response, error) {
	catalog := make(map[string]app.Product, len(p.SKUs))
	for _, sku := range p.SKUs {
		catalog[sku] = app.Product{SKU: sku, Name: sku, PriceMinor: unitPrice, Currency: "JPY", Active: true}
	}
	o, err := p.Build(catalog)
	if err != nil {
		return app.Response{}, err
	}
	status, body, err := p.Render(o)
	if err != nil {
		return app.Response{}, err
	}
	if !json.Valid(body) {
		return app.Response{}, errors.New("the rendered response is not JSON")
	}
	r.placed = o
	return app.Response{Status: status, Body: body, OrderID: o.ID()}, nil
}
