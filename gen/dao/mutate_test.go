package dao_test

import (
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao"
)

func TestPartialUpdate(t *testing.T) {
	all := []string{"Id", "Seq", "Name", "Size", "Color"}
	values := []any{"a", int64(1), "n", int64(3), "red"}
	key := []string{"Id", "Seq"}
	tests := []struct {
		name     string
		columns  []string
		wantCols []string
		wantVals []any
	}{
		{"key only", nil, []string{"Id", "Seq"}, []any{"a", int64(1)}},
		{"key first, then the columns in the given order", []string{"Color", "Name"}, []string{"Id", "Seq", "Color", "Name"}, []any{"a", int64(1), "red", "n"}},
		{"a repeated or key column once", []string{"Size", "Id", "Size"}, []string{"Id", "Seq", "Size"}, []any{"a", int64(1), int64(3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keyBefore := append([]string(nil), key...)
			got, err := dao.PartialUpdate("T", key, all, values, tt.columns)
			if err != nil {
				t.Fatal(err)
			}
			if want := spanner.Update("T", tt.wantCols, tt.wantVals); !reflect.DeepEqual(got, want) {
				t.Errorf("PartialUpdate = %+v, want %+v", got, want)
			}
			if !reflect.DeepEqual(key, keyBefore) {
				t.Errorf("PartialUpdate changed the primary key slice to %v", key)
			}
		})
	}
	for _, tt := range []struct {
		name    string
		all     []string
		columns []string
		want    string
	}{
		{"unknown column", all, []string{"Nope"}, `update T: no writable column "Nope"`},
		{"values do not match the columns", all[:4], nil, "update T: 4 columns but 5 values"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := dao.PartialUpdate("T", key, tt.all, values, tt.columns); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("PartialUpdate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
