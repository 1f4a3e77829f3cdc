package order

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFreeStringsArePlainText: the customer's free strings (customer_id, sku, email and the
// payment's detail) refuse invalid UTF-8 and control and format characters, naming the field.
func TestFreeStringsArePlainText(t *testing.T) {
	validate := map[string]func(s string) []string{
		"customer_id": ValidateCustomer,
		"sku":         func(s string) []string { return ValidateLines([]Line{{SKU: s, Quantity: 1}}) },
		"email":       func(s string) []string { return ValidateEmail(s+"@example.com", MethodCard) },
		"payment_method": func(s string) []string {
			_, p := ParsePayment("card", map[string]string{FieldPaymentMethod: "pm_" + s})
			return p
		},
		"store": func(s string) []string {
			_, p := ParsePayment("konbini", map[string]string{FieldStore: s})
			return p
		},
	}
	// want is the problem for each field, at the character's byte offset in what is validated.
	tests := []struct {
		name  string
		value string
		char  string // "" for plain text
		at    int
	}{
		{name: "NUL", value: "a\x00b", char: "U+0000", at: 1},
		{name: "escape", value: "\x1b[31mred", char: "U+001B", at: 0},
		{name: "DEL", value: "ab\x7f", char: "U+007F", at: 2},
		{name: "C1 control", value: "a\u0085", char: "U+0085", at: 1},
		{name: "right-to-left override", value: "gpj.\u202eexe", char: "U+202E", at: 4},
		{name: "zero-width space", value: "a\u200bb", char: "U+200B", at: 1},
		{name: "byte order mark", value: "\ufeffab", char: "U+FEFF", at: 0},
		{name: "invalid UTF-8", value: "a\xffb", char: "invalid"},
	}
	offset := map[string]int{"payment_method": len("pm_")}
	want := map[string]func(char string, at int) string{
		"customer_id": func(c string, at int) string {
			return "customer_id has the control or format character " + c + " at byte " + strconv.Itoa(at)
		},
		"sku": func(c string, at int) string {
			return "lines[0]: sku has the control or format character " + c + " at byte " + strconv.Itoa(at)
		},
		"email": func(c string, at int) string {
			return "email has the control or format character " + c + " at byte " + strconv.Itoa(at)
		},
		"payment_method": func(c string, at int) string {
			return "payment.payment_method has the control or format character " + c + " at byte " + strconv.Itoa(at)
		},
		"store": func(c string, at int) string {
			return "payment.store has the control or format character " + c + " at byte " + strconv.Itoa(at)
		},
	}
	invalid := map[string]string{
		"customer_id": "customer_id is not valid UTF-8", "sku": "lines[0]: sku is not valid UTF-8", "email": "email is not valid UTF-8",
		"payment_method": "payment.payment_method is not valid UTF-8", "store": "payment.store is not valid UTF-8",
	}
	for field, v := range validate {
		for _, tc := range tests {
			t.Run(field+"/"+tc.name, func(t *testing.T) {
				w := invalid[field]
				if tc.char != "invalid" {
					w = want[field](tc.char, tc.at+offset[field])
				}
				if diff := cmp.Diff([]string{w}, v(tc.value)); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
			})
		}
	}
	// Letters of any script are plain text.
	for _, s := range []string{"café", "山田太郎", "José-Müller 😀"} {
		if p := ValidateCustomer(s); p != nil {
			t.Errorf("ValidateCustomer(%q) = %v, want none", s, p)
		}
		if p := ValidateLines([]Line{{SKU: s, Quantity: 1}}); p != nil {
			t.Errorf("ValidateLines(sku %q) = %v, want none", s, p)
		}
	}
}
