// Package sqlfuncs is the emulator's GoogleSQL function and operator library. The SQL translator
// resolves names and structure; everything about the *values* (which function exists, which
// argument types it takes, what it returns, and how it is computed in SQLite) lives here.
//
// Each entry point receives already-translated SQLite fragments for its arguments together with
// their GoogleSQL types, and returns a SQLite fragment and the GoogleSQL result type. Values in
// SQLite are in the storage form documented in package spantype; fragments returned here must
// produce that form too. Go implementations are registered as SQLite functions by Register.
//
// Errors: a bad call (unknown function, wrong argument count or types) is reported at
// translation time as an *Error with code InvalidArgument. A runtime failure inside a registered
// SQLite function (overflow, division by zero, bad cast) must make the SQLite statement fail
// with a message that begins with RuntimeErrorPrefix followed by the gRPC code name and ": ",
// e.g. "spanner-error:OUT_OF_RANGE: int64 overflow: 9223372036854775807 + 1"; the engine turns
// that into a gRPC status with that code.
package sqlfuncs

import "github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"

// RuntimeErrorPrefix starts the message of an error raised inside a registered SQLite function.
const RuntimeErrorPrefix = "spanner-error:"

// Arg is a translated argument.
type Arg struct {
	SQL  string        // SQLite expression, already parenthesised where needed
	Type spantype.Type // its GoogleSQL type; Unknown for an untyped NULL
	// StringLiteral is set when the argument is a STRING literal, so it can be coerced to DATE,
	// TIMESTAMP, NUMERIC or JSON where the context needs one (GoogleSQL literal coercion).
	StringLiteral *string
	// IsNullLiteral is set for a NULL literal.
	IsNullLiteral bool
}

// Call is a function call as written.
type Call struct {
	Name     string // as written; look-ups are case-insensitive; may be qualified (NET.HOST)
	Args     []Arg
	Distinct bool // aggregate DISTINCT
	// IgnoreNulls / RespectNulls for ARRAY_AGG and friends.
	IgnoreNulls bool
	// NamedArgs holds named arguments (e.g. JSON functions' stringify_wide_numbers).
	NamedArgs map[string]Arg
	// Having is an aggregate's HAVING MAX/HAVING MIN modifier (ARRAY_AGG(x HAVING MAX y));
	// nil when absent.
	Having *Having
	// OrderBy and Limit are an aggregate's ORDER BY and LIMIT (ARRAY_AGG(x ORDER BY y DESC
	// LIMIT 3), STRING_AGG(s, ',' ORDER BY s)); Limit is nil when absent.
	OrderBy []OrderItem
	Limit   *Arg
}

// OrderItem is one ORDER BY key of an aggregate call. NULLs sort first ascending and last
// descending, as GoogleSQL does by default.
type OrderItem struct {
	Expr Arg
	Desc bool
}

// Having is the HAVING MAX expr / HAVING MIN expr modifier of an aggregate call: only the rows
// whose expr equals the group's maximum (minimum) are aggregated.
type Having struct {
	Max  bool // HAVING MAX; false means HAVING MIN
	Expr Arg
}

// Error is a translation-time error.
type Error struct {
	Code string // gRPC code name: "INVALID_ARGUMENT", "UNIMPLEMENTED", ...
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// The entry points below are the whole contract with the translator. They live in this package's
// other files:
//
//	// Register registers every Go-implemented SQLite function with modernc.org/sqlite
//	// (sqlite.RegisterDeterministicScalarFunction / RegisterFunction). Safe to call many times.
//	func Register()
//
//	// Function translates a scalar function call (UPPER, SUBSTR, TIMESTAMP_ADD, JSON_VALUE,
//	// ARRAY_LENGTH, GENERATE_UUID, FARM_FINGERPRINT, IF, IFNULL, COALESCE, NULLIF, GREATEST, ...).
//	func Function(c Call) (Arg, error)
//
//	// IsAggregate reports whether name (case-insensitive) is an aggregate function.
//	func IsAggregate(name string) bool
//
//	// Aggregate translates an aggregate call (COUNT, COUNT(DISTINCT), SUM, AVG, MIN, MAX,
//	// ARRAY_AGG, STRING_AGG, LOGICAL_AND, LOGICAL_OR, COUNTIF, ANY_VALUE, BIT_AND/OR/XOR).
//	// COUNT(*) arrives as Name "COUNT" with no Args.
//	func Aggregate(c Call) (Arg, error)
//
//	// Binary translates a binary operator: + - * / || = != <> < <= > >= AND OR LIKE
//	// "NOT LIKE" & | ^ << >> (and "IS DISTINCT FROM", "IS NOT DISTINCT FROM"). Operand types are
//	// checked and coerced (INT64 with FLOAT64, STRING literal with DATE/TIMESTAMP, ...).
//	func Binary(op string, l, r Arg) (Arg, error)
//
//	// Unary translates - + NOT ~.
//	func Unary(op string, x Arg) (Arg, error)
//
//	// Cast translates CAST (safe=false) and SAFE_CAST (safe=true).
//	func Cast(x Arg, to spantype.Type, safe bool) (Arg, error)
//
//	// Coerce converts x implicitly to type to (as for INSERT values, UNION columns, IN lists,
//	// CASE branches), or fails with INVALID_ARGUMENT when GoogleSQL would not coerce.
//	func Coerce(x Arg, to spantype.Type) (Arg, error)
//
//	// Supertype returns the common supertype of the given types (Unknown entries are ignored),
//	// or an error when there is none.
//	func Supertype(ts ...spantype.Type) (spantype.Type, error)
//
//	// Extract translates EXTRACT(part FROM x [AT TIME ZONE tz]); tz may be nil.
//	func Extract(part string, x Arg, tz *Arg) (Arg, error)
//
//	// OrderKey returns a SQLite expression whose SQLite ordering is the GoogleSQL ordering of x
//	// (identity for most types; NUMERIC and FLOAT64 need help). Fails for unorderable types.
//	func OrderKey(x Arg) (string, error)
