package catalog

import (
	"testing"

	"github.com/cloudspannerecosystem/memefish"
)

func TestRefersTo(t *testing.T) {
	tests := []struct {
		expr string
		col  string
		want bool
	}{
		{"A + 1", "a", true},
		{"B > 0 AND (C < 2)", "C", true},
		{"UPPER(Name)", "Name", true},
		{"UPPER(Name)", "Upper", false},
		{"EXTRACT(DAY FROM Created)", "Day", false},
		{"EXTRACT(DAY FROM Created)", "Created", true},
		{"S.Field", "Field", false},
		{"S.Field", "S", true},
		{"1 + 2", "A", false},
	}
	for _, tt := range tests {
		e, err := memefish.ParseExpr("", tt.expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := refersTo(e, tt.col); got != tt.want {
			t.Errorf("refersTo(%s, %s) = %v, want %v", tt.expr, tt.col, got, tt.want)
		}
	}
}
