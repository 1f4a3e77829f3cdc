package generator

import (
	"go/token"
	"strings"
	"unicode"
)

// singular turns a table name into the name of its row type: Products → Product, OrderItems →
// OrderItem, Categories → Category, Addresses → Address, Inventory → Inventory.
func singular(name string) string {
	lower := strings.ToLower(name)
	switch {
	case strings.HasSuffix(lower, "ies") && len(name) > 3:
		return name[:len(name)-3] + "y"
	case strings.HasSuffix(lower, "sses"), strings.HasSuffix(lower, "xes"),
		strings.HasSuffix(lower, "ches"), strings.HasSuffix(lower, "shes"):
		return name[:len(name)-2]
	case strings.HasSuffix(lower, "ss"), strings.HasSuffix(lower, "us"), strings.HasSuffix(lower, "is"):
		return name
	case strings.HasSuffix(lower, "s") && len(name) > 1:
		return name[:len(name)-1]
	}
	return name
}

// exported makes a Spanner identifier a Go exported identifier (first letter upper-cased).
func exported(name string) string {
	r := []rune(name)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

// param makes a column name a Go parameter name: OrderId → orderId, SKU → sku, URLPath → urlPath.
func param(name string) string {
	r := []rune(name)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	switch {
	case n == 0:
	case n == 1 || n == len(r):
		for i := 0; i < n; i++ {
			r[i] = unicode.ToLower(r[i])
		}
	default:
		for i := 0; i < n-1; i++ {
			r[i] = unicode.ToLower(r[i])
		}
	}
	s := string(r)
	if token.IsKeyword(s) || reserved[s] {
		s += "_"
	}
	return s
}

// reserved are names the generated functions use for their own parameters and imports.
var reserved = map[string]bool{
	"ctx": true, "r": true, "keys": true, "limit": true, "columns": true,
	"spanner": true, "dao": true, "time": true, "civil": true, "big": true, "context": true,
}

// snake turns a table name into a file name: OrderItems → order_items.
func snake(name string) string {
	var b strings.Builder
	r := []rune(name)
	for i, c := range r {
		if unicode.IsUpper(c) {
			if i > 0 && (unicode.IsLower(r[i-1]) || (i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1]))) {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}
