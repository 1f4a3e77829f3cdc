package daotest

import (
	"context"
	"errors"
	"math/big"
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	"github.com/spanmart/spanmart/gen/dao"
)

// rowType is what every generated row type has.
type rowType[T any] interface {
	*T
	Key() spanner.Key
	Insert() *spanner.Mutation
	Update() *spanner.Mutation
	InsertOrUpdate() *spanner.Mutation
	Replace() *spanner.Mutation
	UpdateColumns(...string) (*spanner.Mutation, error)
	Delete() *spanner.Mutation
}

// lc describes the life of one row of one table: every generated function of the table is used.
type lc[T any, P rowType[T]] struct {
	parents  []*spanner.Mutation                                       // rows the row needs (interleaving)
	values   map[string]any                                            // the row; spanner.CommitTimestamp where the column takes it
	read     func(ctx context.Context, r dao.Reader, x *T) (*T, error) // Read<T>(pk...)
	readRows func(ctx context.Context, r dao.Reader, ks spanner.KeySet) ([]*T, error)
	del      func(x *T) *spanner.Mutation // Delete<T>(pk...)
	change   map[string]any               // a full Update
	listed   map[string]any               // UpdateColumns of these...
	unlisted map[string]any               // ...while these change in the struct only
	indexes  map[string]func(ctx context.Context, r dao.Reader, x *T) ([]*T, error)
	derive   func(want *T) // sets generated columns in an expected row
}

// opts compare what go-cmp cannot by default (big.Rat has unexported fields).
var opts = cmp.Options{cmp.Comparer(func(a, b big.Rat) bool { return a.Cmp(&b) == 0 })}

// fill returns a T with the fields named in values set.
func fill[T any](values map[string]any) *T {
	x := new(T)
	set(x, values)
	return x
}

func set(x any, values map[string]any) {
	v := reflect.ValueOf(x).Elem()
	for name, val := range values {
		f := v.FieldByName(name)
		if !f.IsValid() {
			panic("no field " + name + " in " + v.Type().String())
		}
		f.Set(reflect.ValueOf(val))
	}
}

func clone[T any](x *T) *T {
	c := *x
	return &c
}

// stamp replaces spanner.CommitTimestamp placeholders by the commit timestamp ts.
func stamp(x any, ts time.Time) {
	v := reflect.ValueOf(x).Elem()
	for i := 0; i < v.NumField(); i++ {
		switch f := v.Field(i).Addr().Interface().(type) {
		case *time.Time:
			if *f == spanner.CommitTimestamp {
				*f = ts
			}
		case *spanner.NullTime:
			if f.Valid && f.Time == spanner.CommitTimestamp {
				f.Time = ts
			}
		}
	}
}

func apply(t *testing.T, client *spanner.Client, ms ...*spanner.Mutation) time.Time {
	t.Helper()
	ts, err := client.Apply(context.Background(), ms)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return ts
}

// readOnly runs read in a multi-use read-only transaction: index reads read the index, then the
// table, which a single-use transaction (client.Single()) cannot do.
func readOnly[T any](t *testing.T, client *spanner.Client, read func(dao.Reader) ([]*T, error)) ([]*T, error) {
	t.Helper()
	txn := client.ReadOnlyTransaction()
	defer txn.Close()
	return read(txn)
}

// unique adapts a unique index read (one row or dao.ErrNotFound) to a slice.
func unique[T any](x *T, err error) ([]*T, error) {
	if errors.Is(err, dao.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []*T{x}, nil
}

func (c lc[T, P]) run(t *testing.T, client *spanner.Client) {
	ctx := context.Background()
	if len(c.parents) > 0 {
		apply(t, client, c.parents...)
	}
	check := func(step string, want *T) {
		t.Helper()
		if c.derive != nil {
			want = clone(want)
			c.derive(want)
		}
		got, err := c.read(ctx, client.Single(), want)
		if err != nil {
			t.Fatalf("%s: read: %v", step, err)
		}
		if diff := cmp.Diff(want, got, opts); diff != "" {
			t.Fatalf("%s: read (-want +got):\n%s", step, diff)
		}
		rows, err := c.readRows(ctx, client.Single(), spanner.KeySetFromKeys(P(want).Key()))
		if err != nil {
			t.Fatalf("%s: read rows: %v", step, err)
		}
		if diff := cmp.Diff([]*T{want}, rows, opts); diff != "" {
			t.Fatalf("%s: read rows (-want +got):\n%s", step, diff)
		}
		for name, read := range c.indexes {
			got, err := readOnly(t, client, func(r dao.Reader) ([]*T, error) { return read(ctx, r, want) })
			if err == errSkip {
				continue
			}
			if err != nil {
				t.Fatalf("%s: read by index %s: %v", step, name, err)
			}
			if diff := cmp.Diff([]*T{want}, got, opts); diff != "" {
				t.Fatalf("%s: read by index %s (-want +got):\n%s", step, name, diff)
			}
		}
	}
	gone := func(step string, x *T) {
		t.Helper()
		_, err := c.read(ctx, client.Single(), x)
		if !errors.Is(err, dao.ErrNotFound) {
			t.Fatalf("%s: read = %v, want dao.ErrNotFound", step, err)
		}
		for name, read := range c.indexes {
			got, err := readOnly(t, client, func(r dao.Reader) ([]*T, error) { return read(ctx, r, x) })
			if err == errSkip {
				continue
			}
			if err != nil || len(got) != 0 {
				t.Fatalf("%s: read by index %s = %v, %v; want nothing", step, name, got, err)
			}
		}
	}

	row := fill[T](c.values)
	want := clone(row)
	stamp(want, apply(t, client, P(row).Insert()))
	check("insert", want)
	if _, err := client.Apply(ctx, []*spanner.Mutation{P(row).Insert()}); spanner.ErrCode(err) != codes.AlreadyExists {
		t.Fatalf("second insert: %v, want AlreadyExists", err)
	}

	upd := clone(row)
	set(upd, c.change)
	want = clone(upd)
	stamp(want, apply(t, client, P(upd).Update()))
	check("update", want)

	// Partial update: only the listed columns (and the key) are written.
	part := clone(upd)
	set(part, c.listed)
	set(part, c.unlisted)
	var cols []string
	for name := range c.listed {
		cols = append(cols, name)
	}
	m, err := P(part).UpdateColumns(cols...)
	if err != nil {
		t.Fatal(err)
	}
	prev := want
	want = clone(prev)
	set(want, c.listed)
	stamp(want, apply(t, client, m))
	check("partial update", want)
	if _, err := P(part).UpdateColumns("NoSuchColumn"); err == nil {
		t.Fatal("UpdateColumns(NoSuchColumn) succeeded")
	}

	apply(t, client, c.del(want))
	gone("Delete<T>", want)

	want = clone(row)
	stamp(want, apply(t, client, P(row).InsertOrUpdate()))
	check("insert or update", want)
	want = clone(upd)
	stamp(want, apply(t, client, P(upd).Replace()))
	check("replace", want)
	apply(t, client, P(want).Delete())
	gone("Delete", want)
}
