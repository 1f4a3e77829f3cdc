package engine

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"modernc.org/sqlite"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/catalog"
	"github.com/spanmart/spanmart/emulator/spanneremu/internal/sqlfuncs"
)

// SQLite extended result codes the engine maps to Spanner errors.
const (
	sqliteConstraintCheck      = 275
	sqliteConstraintForeignKey = 787
	sqliteConstraintNotNull    = 1299
	sqliteConstraintPrimaryKey = 1555
	sqliteConstraintUnique     = 2067
	sqliteConstraintTrigger    = 1811
)

func errorf(c codes.Code, format string, args ...any) error {
	return status.Errorf(c, format, args...)
}

// writeContext describes the write that failed, so a SQLite constraint error can be turned into
// the message Spanner gives.
type writeContext struct {
	table  *catalog.Table
	key    string // rendered key, "" if unknown
	insert bool   // the write could have created a row
	schema *catalog.Schema
}

// mapError converts an error from SQLite (or from a registered function) to a gRPC status error.
// wc may be nil when the failing statement was a query.
func mapError(err error, wc *writeContext) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return mapRuntimeMessage(err.Error(), codes.Internal)
	}
	msg := trailingCode.ReplaceAllString(se.Error(), "")
	if i := strings.Index(msg, sqlfuncs.RuntimeErrorPrefix); i >= 0 {
		return mapRuntimeMessage(msg[i:], codes.InvalidArgument)
	}
	tname, key := "", ""
	if wc != nil && wc.table != nil {
		tname, key = wc.table.Name, wc.key
	}
	keyPart := ""
	if key != "" {
		keyPart = " referenced by key: " + key
	}
	switch se.Code() {
	case sqliteConstraintPrimaryKey:
		return errorf(codes.AlreadyExists, "Table %s: Row %s already exists.", tname, orUnknown(key))
	case sqliteConstraintUnique:
		idx := uniqueIndexName(msg, wc)
		return errorf(codes.AlreadyExists, "Unique index violation on index %s at index key %s. It conflicts with row %s in table %s.", idx, "[...]", orUnknown(key), tname)
	case sqliteConstraintNotNull:
		col := msg[strings.LastIndex(msg, ".")+1:]
		return errorf(codes.FailedPrecondition, "Cannot specify a null value for column: %s.%s in table: %s%s", tname, col, tname, keyPart)
	case sqliteConstraintCheck:
		name := strings.TrimSpace(msg[strings.LastIndex(msg, ":")+1:])
		if i := strings.Index(msg, "spanner_len:"); i >= 0 {
			tc := strings.TrimSpace(msg[i+len("spanner_len:"):])
			t, c, _ := strings.Cut(tc, ".")
			return errorf(codes.FailedPrecondition, "New value exceeds the maximum size limit for this column in table: %s, column: %s%s.", t, c, keyPart)
		}
		if i := strings.Index(msg, "spanner_check:"); i >= 0 {
			tc := strings.TrimSpace(msg[i+len("spanner_check:"):])
			t, c, _ := strings.Cut(tc, ".")
			return errorf(codes.OutOfRange, "Check constraint `%s`.`%s` is violated for key %s", t, c, orUnknown(key))
		}
		return errorf(codes.OutOfRange, "Check constraint %s is violated for key %s", name, orUnknown(key))
	case sqliteConstraintForeignKey:
		if wc != nil && wc.table != nil && wc.table.Parent != "" && wc.insert {
			return errorf(codes.NotFound, "Insert failed because key was not found in parent table:  Parent Table: %s  Child Table: %s  Key: %s", wc.table.Parent, tname, orUnknown(key))
		}
		if wc != nil && wc.table != nil && wc.insert {
			if fk := firstForeignKey(wc.table); fk != nil {
				return errorf(codes.FailedPrecondition, "Foreign key constraint `%s` is violated on table `%s`. Cannot find referenced values in %s(%s).", fk.Name, tname, fk.ReferencedTable, strings.Join(fk.ReferencedColumns, ", "))
			}
		}
		if wc != nil && wc.table != nil {
			if child, fk := referencingForeignKey(wc.schema, wc.table); fk != nil {
				return errorf(codes.FailedPrecondition, "Foreign key constraint `%s` is violated on table `%s`. Cannot delete or update a row of %s that is still referenced by table %s.", fk.Name, child, tname, child)
			}
			if hasChildren(wc.schema, wc.table) {
				return errorf(codes.FailedPrecondition, "Integrity constraint violation during delete/replace. Found child row in an interleaved table of %s%s.", tname, keyPart)
			}
		}
		return errorf(codes.FailedPrecondition, "Foreign key constraint violated on table %s%s.", tname, keyPart)
	}
	if strings.Contains(msg, "interrupted") {
		return errorf(codes.DeadlineExceeded, "Operation was cancelled or timed out: %s", msg)
	}
	for _, limit := range sqliteLimits {
		if strings.Contains(msg, limit) {
			return errorf(codes.InvalidArgument, "The statement is too deeply nested or too large: %s", msg)
		}
	}
	return errorf(codes.Internal, "emulator storage error: %s", msg)
}

// sqliteLimits are the messages of SQLite's limits on a statement's shape (its parser's stack,
// expression depth, compound SELECTs, function arguments, variables, value size). A statement
// memefish parses can still exceed them once translated (SELECT ((((...1)))) three thousand deep):
// that is the caller's statement, which real Spanner also refuses as too complex, not a failure
// of the emulator's storage.
var sqliteLimits = []string{
	"Recursion limit", "parser stack overflow", "Expression tree is too large", "too many terms in compound SELECT",
	"too many arguments on function", "too many SQL variables", "too many columns", "string or blob too big",
}

func hasChildren(s *catalog.Schema, t *catalog.Table) bool {
	if s == nil {
		return false
	}
	for _, c := range s.Tables {
		if strings.EqualFold(c.Parent, t.Name) {
			return true
		}
		for _, fk := range c.ForeignKeys {
			if strings.EqualFold(fk.ReferencedTable, t.Name) {
				return true
			}
		}
	}
	return false
}

func firstForeignKey(t *catalog.Table) *catalog.ForeignKey {
	if len(t.ForeignKeys) > 0 {
		return t.ForeignKeys[0]
	}
	return nil
}

// referencingForeignKey finds a foreign key of another table that references t.
func referencingForeignKey(s *catalog.Schema, t *catalog.Table) (string, *catalog.ForeignKey) {
	if s == nil {
		return "", nil
	}
	for _, c := range s.Tables {
		for _, fk := range c.ForeignKeys {
			if strings.EqualFold(fk.ReferencedTable, t.Name) {
				return c.Name, fk
			}
		}
	}
	return "", nil
}

func uniqueIndexName(msg string, wc *writeContext) string {
	if wc == nil || wc.schema == nil || wc.table == nil {
		return "(unknown)"
	}
	if idx, ok := wc.schema.UniqueIndexViolated(wc.table, msg); ok {
		return idx.Name
	}
	return "(unknown)"
}

func orUnknown(key string) string {
	if key == "" {
		return "(unknown)"
	}
	return key
}

// mapRuntimeMessage turns "spanner-error:CODE: message" into a status error.
func mapRuntimeMessage(msg string, def codes.Code) error {
	i := strings.Index(msg, sqlfuncs.RuntimeErrorPrefix)
	if i < 0 {
		return status.Error(def, msg)
	}
	rest := msg[i+len(sqlfuncs.RuntimeErrorPrefix):]
	codeName, text, ok := strings.Cut(rest, ": ")
	if !ok {
		return status.Error(def, rest)
	}
	if c, ok := codeByName[codeName]; ok {
		// SQLite appends the result code, " (1)"; keep the text as the function gave it.
		return status.Error(c, trailingCode.ReplaceAllString(text, ""))
	}
	return status.Error(def, rest)
}

var trailingCode = regexp.MustCompile(` \(\d+\)$`)

var codeByName = func() map[string]codes.Code {
	m := map[string]codes.Code{}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		name := strings.ToUpper(toSnake(c.String()))
		m[name] = c
	}
	return m
}()

// toSnake turns "InvalidArgument" into "Invalid_Argument".
func toSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func internalf(format string, args ...any) error {
	return status.Error(codes.Internal, fmt.Sprintf(format, args...))
}
