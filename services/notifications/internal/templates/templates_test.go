package templates

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/services/notifications/internal/notification"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

const orderID = "7f0c2a1e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"

var expires = time.Date(2025, 3, 14, 14, 59, 0, 0, time.UTC) // 23:59 in Japan

// samples are every template's data, with the values each rendering must show.
var samples = []struct {
	name string
	data Data
	// show must appear in the text and the HTML body of every language.
	show []string
}{
	{"order_confirmed", OrderConfirmed{OrderID: orderID, Total: Money{3100, "JPY"}, Lines: []Line{
		{SKU: "TEA-001", Quantity: 2, UnitPrice: Money{1200, "JPY"}},
		{SKU: "CUP-002", Quantity: 1, UnitPrice: Money{700, "JPY"}},
	}}, []string{orderID, "TEA-001", "CUP-002", "¥2,400", "¥700", "¥3,100"}},
	{"payment_instructions_konbini", PaymentInstructions{
		OrderID: orderID, Amount: Money{1500, "JPY"}, Method: "konbini", Store: "lawson", PaymentCode: "123456789012",
		ConfirmationCode: "4321", InstructionsURL: "https://pay.example/slips/abc", ExpiresAt: expires,
	}, []string{orderID, "¥1,500", "123456789012", "4321", "https://pay.example/slips/abc", "2025", "23:59"}},
	{"payment_instructions_bank", PaymentInstructions{
		OrderID: orderID, Amount: Money{250000, "JPY"}, Method: "bank_transfer", ExpiresAt: expires,
		Bank: &BankAccount{BankName: "みずほ銀行", BranchName: "東京営業部", AccountType: "ordinary", AccountNumber: "1234567", AccountHolder: "スパンマート（カ"},
	}, []string{orderID, "¥250,000", "みずほ銀行", "東京営業部", "1234567", "スパンマート（カ"}},
	{"order_shipped", OrderShipped{OrderID: orderID, Carrier: "yamato", TrackingNumber: "4455-6677-8899"},
		[]string{orderID, "4455-6677-8899"}},
	{"order_cancelled", OrderCancelled{OrderID: orderID, Reason: "out_of_stock"}, []string{orderID}},
	{"payment_refunded", PaymentRefunded{OrderID: orderID, Amount: Money{1999, "USD"}}, []string{orderID, "19.99 USD"}},
}

// TestEveryTemplateRenders renders every template in every language and compares it with its
// golden file (go test -update rewrites them): nothing is missing (no "<no value>", every value of
// the data shows in both bodies), the subject is one line, and the HTML body is a whole document
// in the right language.
func TestEveryTemplateRenders(t *testing.T) {
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	covered := map[Name]bool{}
	for _, s := range samples {
		covered[s.data.Template()] = true
		for _, lang := range Languages {
			t.Run(s.name+"/"+string(lang), func(t *testing.T) {
				c, err := r.Render(lang, s.data)
				if err != nil {
					t.Fatal(err)
				}
				if c.Subject == "" || strings.ContainsAny(c.Subject, "\r\n") || !strings.Contains(c.Subject, orderID) {
					t.Errorf("subject %q: want one line naming the order", c.Subject)
				}
				for part, body := range map[string]string{"subject": c.Subject, "text": c.Text, "html": c.HTML} {
					for _, bad := range []string{"<no value>", "%!", "ZgotmplZ"} {
						if strings.Contains(body, bad) {
							t.Errorf("%s contains %q:\n%s", part, bad, body)
						}
					}
				}
				for _, want := range s.show {
					if !strings.Contains(c.Text, want) {
						t.Errorf("text body lacks %q:\n%s", want, c.Text)
					}
					if !strings.Contains(c.HTML, want) {
						t.Errorf("HTML body lacks %q:\n%s", want, c.HTML)
					}
				}
				if !strings.HasPrefix(c.HTML, "<!DOCTYPE html>") || !strings.Contains(c.HTML, `<html lang="`+string(lang)+`">`) {
					t.Errorf("HTML body is not a document in %s:\n%s", lang, c.HTML)
				}
				golden(t, filepath.Join("testdata", s.name+"."+string(lang)+".golden"),
					"Subject: "+c.Subject+"\n\n----- text -----\n"+c.Text+"\n----- html -----\n"+c.HTML)
			})
		}
	}
	for _, n := range Names {
		if !covered[n] {
			t.Errorf("template %s has no sample", n)
		}
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}

func TestSubjects(t *testing.T) {
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lang notification.Language
		data Data
		want string
	}{
		{notification.Japanese, OrderConfirmed{OrderID: "o-1"}, "ご注文を承りました (注文番号 o-1)"},
		{notification.English, OrderConfirmed{OrderID: "o-1"}, "Your order o-1 is confirmed"},
		{notification.Japanese, OrderShipped{OrderID: "o-1"}, "ご注文の商品を発送しました (注文番号 o-1)"},
		{notification.English, PaymentRefunded{OrderID: "o-1"}, "Your refund for order o-1"},
		// A language the templates are not written in renders in Japanese, the shop's default.
		{"fr", OrderCancelled{OrderID: "o-1"}, "ご注文をキャンセルいたしました (注文番号 o-1)"},
		// Data never breaks the header onto a second line.
		{notification.English, OrderShipped{OrderID: "o-1\r\nBcc: x@example.com"}, "Your order o-1 Bcc: x@example.com has shipped"},
	} {
		got, err := r.Render(c.lang, c.data)
		if err != nil {
			t.Fatal(err)
		}
		if got.Subject != c.want {
			t.Errorf("Render(%s, %#v).Subject = %q, want %q", c.lang, c.data, got.Subject, c.want)
		}
	}
}

func TestCancellationReasons(t *testing.T) {
	r, err := New()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, reason := range []string{"customer_request", "payment_declined", "payment_insufficient_funds", "payment_expired", "out_of_stock", "shipment_failed", "something_new"} {
		for _, lang := range Languages {
			c, err := r.Render(lang, OrderCancelled{OrderID: "o-1", Reason: reason})
			if err != nil {
				t.Fatal(err)
			}
			sentence := vocabulary[lang].reasons[reason]
			if sentence == "" {
				sentence = vocabulary[lang].reasonOther
			}
			if !strings.Contains(c.Text, sentence) || strings.Contains(c.Text, reason) {
				t.Errorf("%s %s: text body does not explain the reason in words:\n%s", lang, reason, c.Text)
			}
			if other, dup := seen[string(lang)+sentence]; dup && reason != "something_new" {
				t.Errorf("%s: reasons %s and %s read the same", lang, other, reason)
			}
			seen[string(lang)+sentence] = reason
		}
	}
}

func TestMoney(t *testing.T) {
	for _, c := range []struct {
		m    Money
		want string
	}{
		{Money{0, "JPY"}, "¥0"},
		{Money{999, "JPY"}, "¥999"},
		{Money{1500, "JPY"}, "¥1,500"},
		{Money{1234567, "jpy"}, "¥1,234,567"},
		{Money{-1500, "JPY"}, "-¥1,500"},
		{Money{5, "USD"}, "0.05 USD"},
		{Money{123456, "USD"}, "1,234.56 USD"},
		{Money{100000000, "EUR"}, "1,000,000.00 EUR"},
		{Money{-250, "EUR"}, "-2.50 EUR"},
	} {
		if got := c.m.String(); got != c.want {
			t.Errorf("%+v = %q, want %q", c.m, got, c.want)
		}
	}
}

func TestTimesAreJapanTime(t *testing.T) {
	if got, want := vocabulary[notification.Japanese].when(expires), "2025年3月14日(金) 23:59"; got != want {
		t.Errorf("ja: %q, want %q", got, want)
	}
	if got, want := vocabulary[notification.English].when(expires), "Fri, 14 Mar 2025 23:59 JST"; got != want {
		t.Errorf("en: %q, want %q", got, want)
	}
}
