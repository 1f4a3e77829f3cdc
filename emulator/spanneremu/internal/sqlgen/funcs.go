package sqlgen

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"modernc.org/sqlite"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlfuncs"
)

var registerOnce sync.Once

// Register registers the SQLite functions generated SQL relies on (spq_*), and the function
// library's (spf_*). Call it before opening any SQLite connection.
func Register() {
	registerOnce.Do(func() {
		sqlfuncs.Register()
		sqlite.MustRegisterDeterministicScalarFunction("spq_make", -1, spqMake)
		sqlite.MustRegisterDeterministicScalarFunction("spq_elem", 2, spqElem)
		sqlite.MustRegisterDeterministicScalarFunction("spq_json_elem", 2, spqJSONElem)
		sqlite.MustRegisterDeterministicScalarFunction("spq_raise", 2, spqRaise)
		sqlite.MustRegisterDeterministicScalarFunction("spq_array_max_len", 2, spqArrayMaxLen)
		sqlite.MustRegisterScalarFunction("spq_not_future", 1, spqNotFuture)
		sqlite.MustRegisterCollationUtf8(catalog.NumericCollation, compareNumeric)
	})
}

var typeCache sync.Map // type string -> spantype.Type

func cachedType(v driver.Value) (spantype.Type, error) {
	s, _ := v.(string)
	if t, ok := typeCache.Load(s); ok {
		return t.(spantype.Type), nil
	}
	t, err := spantype.ParseType(s)
	if err != nil {
		return spantype.TUnknown, fmt.Errorf("%sINTERNAL: %v", sqlfuncs.RuntimeErrorPrefix, err)
	}
	typeCache.Store(s, t)
	return t, nil
}

// spqMake(type, v1, ...) builds an ARRAY or STRUCT in storage form from element values.
func spqMake(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	t, err := cachedType(args[0])
	if err != nil {
		return nil, err
	}
	elems := make([]any, len(args)-1)
	for i, a := range args[1:] {
		elems[i] = a
	}
	return spantype.EncodeArray(t, elems), nil
}

// spqElem(value, type) converts a value json_each produced for an element back to storage form.
func spqElem(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	if args[0] == nil {
		return nil, nil
	}
	t, err := cachedType(args[1])
	if err != nil {
		return nil, err
	}
	switch t.Code {
	case spantype.Array, spantype.Struct:
		return args[0], nil
	}
	v, err := spantype.JSONElemToStorage(t, jsonValue(args[0]))
	if err != nil {
		return nil, fmt.Errorf("%sINTERNAL: %v", sqlfuncs.RuntimeErrorPrefix, err)
	}
	return v, nil
}

func jsonValue(v driver.Value) any {
	switch x := v.(type) {
	case int64:
		return json.Number(fmt.Sprint(x))
	case float64:
		return x
	case []byte:
		return string(x)
	}
	return v
}

// spqJSONElem(value, type) renders a storage value as JSON element text (for json()).
func spqJSONElem(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	t, err := cachedType(args[1])
	if err != nil {
		return nil, err
	}
	if args[0] == nil {
		return "null", nil
	}
	b, err := json.Marshal(spantype.StorageToJSONElem(t, args[0]))
	if err != nil {
		return nil, fmt.Errorf("%sINTERNAL: %v", sqlfuncs.RuntimeErrorPrefix, err)
	}
	return string(b), nil
}

// spqRaise(code, message) fails the statement with a Spanner error.
func spqRaise(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	return nil, fmt.Errorf("%s%v: %v", sqlfuncs.RuntimeErrorPrefix, args[0], args[1])
}

// compareNumeric is catalog.NumericCollation: NUMERIC values (canonical decimal text) by value,
// so keys and indexes sort as Spanner sorts them.
func compareNumeric(a, b string) int {
	ra, errA := spantype.NumericRat(a)
	rb, errB := spantype.NumericRat(b)
	if errA != nil || errB != nil {
		// Not a number (cannot happen for stored NUMERIC values): fall back to text order.
		return strings.Compare(a, b)
	}
	return ra.Cmp(rb)
}

// spqArrayMaxLen(array, type) is the length of the longest element of an ARRAY<STRING> (in
// characters) or ARRAY<BYTES> (in bytes), for the length check of ARRAY<STRING(N)> columns.
func spqArrayMaxLen(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	s, ok := args[0].(string)
	if !ok {
		return nil, nil
	}
	t, err := cachedType(args[1])
	if err != nil {
		return nil, err
	}
	elems, err := spantype.DecodeArray(t, s)
	if err != nil {
		return nil, fmt.Errorf("%sINTERNAL: %v", sqlfuncs.RuntimeErrorPrefix, err)
	}
	var max int64
	for _, e := range elems {
		var n int64
		switch x := e.(type) {
		case string:
			n = int64(utf8.RuneCountInString(x))
		case []byte:
			n = int64(len(x))
		}
		if n > max {
			max = n
		}
	}
	return max, nil
}

// spqNotFuture(ts) passes a TIMESTAMP through unless it is in the future: a column with
// allow_commit_timestamp must not hold a time after the commit.
func spqNotFuture(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	if s, ok := args[0].(string); ok && s != spantype.PendingCommitTimestamp && s > spantype.FormatTimestamp(time.Now()) {
		return nil, fmt.Errorf("%sFAILED_PRECONDITION: Cannot write timestamps in the future %s to a column with allow_commit_timestamp", sqlfuncs.RuntimeErrorPrefix, s)
	}
	return args[0], nil
}
