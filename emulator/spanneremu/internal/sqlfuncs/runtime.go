package sqlfuncs

import (
	"database/sql/driver"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// runtimeError is an error raised inside a registered SQLite function. Its message carries the
// prefix and gRPC code the engine parses back out of SQLite's error text.
type runtimeError struct {
	code string
	msg  string
}

func (e *runtimeError) Error() string { return RuntimeErrorPrefix + e.code + ": " + e.msg }

func outOfRange(format string, args ...any) error {
	return &runtimeError{code: "OUT_OF_RANGE", msg: fmt.Sprintf(format, args...)}
}

// invalidArg is for the rare runtime errors Spanner reports as INVALID_ARGUMENT (reading a
// pending commit timestamp); failed conversions and function errors are OUT_OF_RANGE.
func invalidArg(format string, args ...any) error {
	return &runtimeError{code: "INVALID_ARGUMENT", msg: fmt.Sprintf(format, args...)}
}

// internalErr reports a value that is not in the storage form its type promises.
func internalErr(format string, args ...any) error {
	return &runtimeError{code: "INTERNAL", msg: fmt.Sprintf(format, args...)}
}

// goFunc is a scalar function implemented in Go and registered with SQLite under name.
type goFunc struct {
	name  string
	nargs int32 // -1: variadic
	// strict functions return NULL when any argument is NULL, without running fn; this is
	// GoogleSQL's rule for nearly every function, so fn can assume non-NULL arguments.
	strict bool
	// volatile functions (GENERATE_UUID, CURRENT_TIMESTAMP) must not be folded by SQLite.
	volatile bool
	fn       func(args []driver.Value) (driver.Value, error)
}

// goAgg is an aggregate implemented in Go.
type goAgg struct {
	name  string
	nargs int32
	make  func() aggState
}

// aggState accumulates one group. step is never called with a NULL first argument unless the
// aggregate asked for NULLs (see aggAdapter).
type aggState interface {
	step(args []driver.Value) error
	result() (driver.Value, error)
}

var (
	scalarFuncs   []goFunc
	aggregateFns  []goAgg
	registerOnce  sync.Once
	registerError error
)

// defStrict declares a strict deterministic Go function.
func defStrict(name string, nargs int32, fn func(args []driver.Value) (driver.Value, error)) {
	scalarFuncs = append(scalarFuncs, goFunc{name: name, nargs: nargs, strict: true, fn: fn})
}

// defLax declares a deterministic Go function that handles NULL arguments itself.
func defLax(name string, nargs int32, fn func(args []driver.Value) (driver.Value, error)) {
	scalarFuncs = append(scalarFuncs, goFunc{name: name, nargs: nargs, fn: fn})
}

func defAgg(name string, nargs int32, mk func() aggState) {
	aggregateFns = append(aggregateFns, goAgg{name: name, nargs: nargs, make: mk})
}

// CallsVolatile reports whether translated SQL calls a volatile Go function (GENERATE_UUID,
// the current time): running it again may give a different result.
func CallsVolatile(sql string) bool {
	prepare()
	for _, f := range scalarFuncs {
		if f.volatile && strings.Contains(sql, f.name+"(") {
			return true
		}
	}
	return false
}

// Register registers every Go-implemented SQLite function with modernc.org/sqlite. It must run
// before the engine opens its connections; calling it again is harmless.
func Register() {
	prepare()
	registerOnce.Do(func() {
		for _, f := range scalarFuncs {
			impl := &sqlite.FunctionImpl{
				NArgs:         f.nargs,
				Deterministic: !f.volatile,
				Scalar: func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
					if f.strict {
						for _, a := range args {
							if a == nil {
								return nil, nil
							}
						}
					}
					return f.fn(args)
				},
			}
			if err := sqlite.RegisterFunction(f.name, impl); err != nil && registerError == nil {
				registerError = err
			}
		}
		for _, a := range aggregateFns {
			impl := &sqlite.FunctionImpl{
				NArgs:         a.nargs,
				Deterministic: true,
				MakeAggregate: func(sqlite.FunctionContext) (sqlite.AggregateFunction, error) {
					return &aggAdapter{state: a.make()}, nil
				},
			}
			if err := sqlite.RegisterFunction(a.name, impl); err != nil && registerError == nil {
				registerError = err
			}
		}
	})
	if registerError != nil {
		// Only a programming error (a duplicate name) gets here.
		panic(registerError)
	}
}

var prepareOnce sync.Once

// prepare runs the declarations that depend on every init having run.
func prepare() {
	prepareOnce.Do(func() {
		for _, f := range lateInits {
			f()
		}
	})
}

// aggAdapter adapts aggState to sqlite.AggregateFunction. An error from step is remembered and
// reported by WindowValue, because SQLite only surfaces errors from the final call reliably.
type aggAdapter struct {
	state aggState
	err   error
}

func (a *aggAdapter) Step(_ *sqlite.FunctionContext, args []driver.Value) error {
	if a.err != nil {
		return nil
	}
	if err := a.state.step(args); err != nil {
		a.err = err
	}
	return nil
}

func (a *aggAdapter) WindowInverse(*sqlite.FunctionContext, []driver.Value) error {
	return fmt.Errorf("%sUNIMPLEMENTED: window functions are not supported", RuntimeErrorPrefix)
}

func (a *aggAdapter) WindowValue(*sqlite.FunctionContext) (driver.Value, error) {
	if a.err != nil {
		return nil, a.err
	}
	return a.state.result()
}

func (a *aggAdapter) Final(*sqlite.FunctionContext) {}

// Conversions from SQLite argument values (storage form) to Go values. SQLite hands us int64,
// float64, string, []byte or nil.

func asInt(v driver.Value) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case float64:
		if x == math.Trunc(x) && x >= -9.223372036854775808e18 && x < 9.223372036854775808e18 {
			return int64(x), nil
		}
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, internalErr("expected an INT64 value, got %v", describe(v))
}

func asFloat(v driver.Value) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case string:
		switch x {
		case "NaN":
			return math.NaN(), nil
		case "Infinity", "inf":
			return math.Inf(1), nil
		case "-Infinity", "-inf":
			return math.Inf(-1), nil
		}
		if f, err := strconv.ParseFloat(x, 64); err == nil {
			return f, nil
		}
	}
	return 0, internalErr("expected a FLOAT64 value, got %v", describe(v))
}

func asString(v driver.Value) string { return spantype.StorageString(v) }

func asBytes(v driver.Value) []byte {
	switch x := v.(type) {
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	return []byte(asString(v))
}

func asNumeric(v driver.Value) (*big.Rat, error) {
	switch x := v.(type) {
	case int64:
		return new(big.Rat).SetInt64(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, outOfRange("Illegal conversion of non-finite floating point number to numeric: %v", x)
		}
		return new(big.Rat).SetFloat64(x), nil
	case string:
		if r, ok := new(big.Rat).SetString(x); ok {
			return r, nil
		}
	}
	return nil, internalErr("expected a NUMERIC value, got %v", describe(v))
}

func asTime(v driver.Value) (time.Time, error) {
	s := asString(v)
	if s == spantype.PendingCommitTimestamp {
		return time.Time{}, invalidArg("%s", spantype.ErrPendingCommitTimestamp.Error())
	}
	t, err := spantype.ParseStoredTimestamp(s)
	if err != nil {
		return time.Time{}, internalErr("corrupt TIMESTAMP value %q", s)
	}
	return t, nil
}

func asDate(v driver.Value) (time.Time, error) {
	s := asString(v)
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		return time.Time{}, internalErr("corrupt DATE value %q", s)
	}
	return t, nil
}

func boolValue(b bool) driver.Value {
	if b {
		return int64(1)
	}
	return int64(0)
}

// storeNumeric renders r as a NUMERIC storage value, failing with OUT_OF_RANGE when it does not
// fit precision 38, scale 9.
func storeNumeric(r *big.Rat) (driver.Value, error) {
	s, err := spantype.FormatNumeric(r)
	if err != nil {
		return nil, outOfRange("numeric overflow: %s", r.FloatString(9))
	}
	return s, nil
}

// storeFloat renders f as a FLOAT64 storage value (NaN is the text 'NaN').
func storeFloat(f float64) driver.Value { return spantype.StoreFloat(f) }

func describe(v driver.Value) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return strconv.Quote(x)
	case []byte:
		return fmt.Sprintf("b%q", x)
	}
	return fmt.Sprint(v)
}

// ParseRuntimeError finds a runtime error raised by a registered function inside a SQLite
// error (whose text wraps ours, e.g. "SQL logic error: spanner-error:OUT_OF_RANGE: ... (1)")
// and returns its gRPC code name and message. ok is false for any other error.
func ParseRuntimeError(err error) (code, msg string, ok bool) {
	if err == nil {
		return "", "", false
	}
	text := err.Error()
	i := strings.Index(text, RuntimeErrorPrefix)
	if i < 0 {
		return "", "", false
	}
	rest := text[i+len(RuntimeErrorPrefix):]
	code, msg, found := strings.Cut(rest, ": ")
	if !found {
		return "", "", false
	}
	// modernc.org/sqlite appends the result code, " (1)".
	if j := strings.LastIndex(msg, " ("); j >= 0 && strings.HasSuffix(msg, ")") {
		if _, err := strconv.Atoi(msg[j+2 : len(msg)-1]); err == nil {
			msg = msg[:j]
		}
	}
	return code, msg, true
}

// memo caches values computed from strings (compiled patterns, parsed type tags). Patterns can
// come from data, so the cache is bounded: when full it starts over rather than grow forever.
type memo[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

const memoLimit = 4096

func (c *memo[V]) Load(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *memo[V]) Store(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= memoLimit {
		c.m = map[string]V{}
	}
	c.m[key] = v
}
