package daotest

import (
	"context"

	"github.com/google/go-cmp/cmp"
	"math/big"
	"os"
	"testing"

	"cloud.google.com/go/civil"
	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao/daotest/typesdb"
	"github.com/spanmart/spanmart/pkg/migrate"
)

// TestAllTypes writes and reads every column type through the code generated from
// tools/daogen/testdata/types: the Go type chosen for each must round-trip through the client.
func TestAllTypes(t *testing.T) {
	const dir = "../../../tools/daogen/testdata/types"
	client, _ := env.NewDatabaseWith(t, migrate.Database{Name: "types", Streams: []migrate.Stream{
		{Name: "types", Dir: "tools/daogen/testdata/types", FS: os.DirFS(dir)},
	}})
	lc[typesdb.AllType, *typesdb.AllType]{
		values: map[string]any{
			"Id": "a", "Seq": int64(1), "B": true, "NB": spanner.NullBool{Bool: false, Valid: true}, "I": int64(-7),
			"NI": spanner.NullInt64{}, "F32": float32(1.5), "NF32": spanner.NullFloat32{Float32: 2.5, Valid: true},
			"F": 3.25, "NF": spanner.NullFloat64{}, "S": "héllo", "NS": str("ns"), "Bs": []byte{0, 1, 2}, "NBs": []byte(nil),
			"D": civil.Date{Year: 2026, Month: 11, Day: 29}, "ND": spanner.NullDate{},
			"T": t0, "NT": tm(t1), "N": *big.NewRat(12345, 100), "NN": spanner.NullNumeric{Numeric: *big.NewRat(1, 4), Valid: true},
			"J": js(map[string]any{"k": "v", "n": []any{"a"}}), "NJ": spanner.NullJSON{},
			"AS_": []spanner.NullString{str("x"), {}}, "AI": []spanner.NullInt64{i64(1), i64(2)},
			"AB": [][]byte{[]byte("y"), nil}, "ATs": []spanner.NullTime{tm(t0)},
			"CreatedAt": spanner.CommitTimestamp, "DeletedAt": spanner.NullTime{},
		},
		change: map[string]any{
			"NB": spanner.NullBool{}, "NI": i64(42), "NF32": spanner.NullFloat32{}, "NF": spanner.NullFloat64{Float64: -0.5, Valid: true},
			"NS": spanner.NullString{}, "NBs": []byte("z"), "ND": spanner.NullDate{Date: civil.Date{Year: 2000, Month: 2, Day: 29}, Valid: true},
			"NT": spanner.NullTime{}, "NN": spanner.NullNumeric{}, "NJ": js([]any{"x", true}), "AS_": []spanner.NullString(nil),
			"S": "changed",
		},
		listed:   map[string]any{"DeletedAt": tm(t1), "AI": []spanner.NullInt64{}},
		unlisted: map[string]any{"I": int64(1000)},
		derive: func(x *typesdb.AllType) {
			x.SLen = i64(int64(len([]rune(x.S))))
		},
		read: func(ctx ctxT, r reader, x *typesdb.AllType) (*typesdb.AllType, error) {
			return typesdb.ReadAllType(ctx, r, x.Id, x.Seq)
		},
		readRows: typesdb.ReadAllTypeRows,
		del:      func(x *typesdb.AllType) *spanner.Mutation { return typesdb.DeleteAllType(x.Id, x.Seq) },
		indexes: map[string]func(ctxT, reader, *typesdb.AllType) ([]*typesdb.AllType, error){
			"AllTypesByS (covering, single read)": func(ctx ctxT, r reader, x *typesdb.AllType) ([]*typesdb.AllType, error) {
				return typesdb.ReadAllTypesByS(ctx, r, x.S)
			},
		},
	}.run(t, client)
}

// TestCoveringIndexSingleRead: an index that stores every column is read in one read, so a
// single-use transaction will do.
func TestCoveringIndexSingleRead(t *testing.T) {
	const dir = "../../../tools/daogen/testdata/types"
	client, _ := env.NewDatabaseWith(t, migrate.Database{Name: "types", Streams: []migrate.Stream{
		{Name: "types", Dir: "tools/daogen/testdata/types", FS: os.DirFS(dir)},
	}})
	for i, s := range []string{"b", "c", "a"} {
		x := &typesdb.AllType{Id: "id", Seq: int64(i), S: s, AI: []spanner.NullInt64{}, D: civil.Date{Year: 2026, Month: 1, Day: 1},
			T: t0, J: js(map[string]any{}), Bs: []byte{}}
		x.SetCommitTimestamps()
		apply(t, client, x.Insert())
	}
	rows, err := typesdb.ReadAllTypesBySKeys(context.Background(), client.Single(), spanner.AllKeys(), 2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.S)
	}
	if diff := cmp.Diff([]string{"c", "b"}, got); diff != "" { // S DESC, limit 2
		t.Errorf("rows by AllTypesByS (-want +got):\n%s", diff)
	}
}
