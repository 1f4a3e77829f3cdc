// Package spantype models GoogleSQL types and converts values between the three forms the
// emulator handles: the wire form (google.protobuf.Value plus a google.spanner.v1.Type), the
// storage form kept in SQLite, and Go values used while evaluating functions.
//
// Storage form (what a SQLite cell holds for a Spanner value; NULL is always SQL NULL):
//
//	BOOL       INTEGER 0/1
//	INT64      INTEGER
//	FLOAT64    REAL; NaN is TEXT 'NaN' (SQLite turns a NaN REAL into NULL)
//	FLOAT32    REAL (same rule)
//	NUMERIC    TEXT canonical decimal ("-12.5", "0", no exponent, no trailing zeros)
//	STRING     TEXT
//	BYTES      BLOB
//	DATE       TEXT "YYYY-MM-DD"
//	TIMESTAMP  TEXT "YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ" (always 9 fraction digits, UTC, so text order is time order)
//	JSON       TEXT, normalized (see NormalizeJSON)
//	ARRAY<T>   TEXT, a JSON array whose elements are the element's JSON form (see below)
//	STRUCT     TEXT, a JSON array of the fields' JSON forms, by position
//
// JSON form of an element inside an ARRAY or STRUCT: null; BOOL true/false (0/1 accepted);
// INT64 a JSON number; FLOAT64 a JSON number, or the strings "NaN", "Infinity", "-Infinity";
// NUMERIC, STRING, DATE, TIMESTAMP, JSON a JSON string holding the storage text; BYTES a JSON
// string holding standard base64; ARRAY and STRUCT nested JSON arrays.
package spantype

import (
	"fmt"
	"strings"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
)

// Code is a GoogleSQL type kind.
type Code int

// The type kinds the emulator supports. Unknown is the type of an untyped NULL or an untyped
// parameter whose type is decided by its context.
const (
	Unknown Code = iota
	Bool
	Int64
	Float64
	Float32
	Numeric
	String
	Bytes
	Date
	Timestamp
	JSON
	Array
	Struct
	// UUID is stored as its canonical lower-case text, whose order is the order of its bytes.
	UUID
)

// Type is a GoogleSQL type. Elem is set for Array; Fields for Struct. Length is the declared
// maximum for STRING(N)/BYTES(N) columns (0 = MAX or not a column).
type Type struct {
	Code   Code
	Elem   *Type
	Fields []Field
	Length int64
}

// Field is a named (or anonymous, Name == "") member of a STRUCT.
type Field struct {
	Name string
	Type Type
}

// Shorthands for the scalar types.
var (
	TBool      = Type{Code: Bool}
	TInt64     = Type{Code: Int64}
	TFloat64   = Type{Code: Float64}
	TFloat32   = Type{Code: Float32}
	TNumeric   = Type{Code: Numeric}
	TString    = Type{Code: String}
	TBytes     = Type{Code: Bytes}
	TDate      = Type{Code: Date}
	TTimestamp = Type{Code: Timestamp}
	TJSON      = Type{Code: JSON}
	TUUID      = Type{Code: UUID}
	TUnknown   = Type{}
)

// ArrayOf returns ARRAY<elem>.
func ArrayOf(elem Type) Type { e := elem; return Type{Code: Array, Elem: &e} }

// StructOf returns STRUCT<fields...>.
func StructOf(fields ...Field) Type { return Type{Code: Struct, Fields: fields} }

// Equal reports whether two types are the same GoogleSQL type (Length is ignored; struct field
// names are compared).
func (t Type) Equal(u Type) bool {
	if t.Code != u.Code {
		return false
	}
	switch t.Code {
	case Array:
		return t.Elem.Equal(*u.Elem)
	case Struct:
		if len(t.Fields) != len(u.Fields) {
			return false
		}
		for i := range t.Fields {
			if t.Fields[i].Name != u.Fields[i].Name || !t.Fields[i].Type.Equal(u.Fields[i].Type) {
				return false
			}
		}
	}
	return true
}

// IsNumeric reports whether t is INT64, FLOAT64, FLOAT32 or NUMERIC.
func (t Type) IsNumeric() bool {
	switch t.Code {
	case Int64, Float64, Float32, Numeric:
		return true
	}
	return false
}

// Orderable reports whether values of t can be compared with < (and so used in ORDER BY, keys,
// MIN/MAX).
func (t Type) Orderable() bool {
	switch t.Code {
	case Array, Struct, JSON:
		return false
	}
	return true
}

// String renders the type as GoogleSQL spells it: INT64, STRING(MAX), ARRAY<STRUCT<a INT64>>.
func (t Type) String() string {
	switch t.Code {
	case Unknown:
		return "UNKNOWN"
	case Bool:
		return "BOOL"
	case Int64:
		return "INT64"
	case Float64:
		return "FLOAT64"
	case Float32:
		return "FLOAT32"
	case Numeric:
		return "NUMERIC"
	case String:
		return "STRING"
	case Bytes:
		return "BYTES"
	case Date:
		return "DATE"
	case Timestamp:
		return "TIMESTAMP"
	case JSON:
		return "JSON"
	case UUID:
		return "UUID"
	case Array:
		return "ARRAY<" + t.Elem.String() + ">"
	case Struct:
		parts := make([]string, len(t.Fields))
		for i, f := range t.Fields {
			if f.Name == "" {
				parts[i] = f.Type.String()
			} else {
				parts[i] = f.Name + " " + f.Type.String()
			}
		}
		return "STRUCT<" + strings.Join(parts, ", ") + ">"
	}
	return fmt.Sprintf("Type(%d)", t.Code)
}

// ColumnString renders a column type as DDL spells it, with the length: STRING(36), BYTES(MAX),
// ARRAY<STRING(MAX)>.
func (t Type) ColumnString() string {
	switch t.Code {
	case String, Bytes:
		if t.Length > 0 {
			return fmt.Sprintf("%s(%d)", t.String(), t.Length)
		}
		return t.String() + "(MAX)"
	case Array:
		return "ARRAY<" + t.Elem.ColumnString() + ">"
	}
	return t.String()
}

// FromProto converts a wire type. An unspecified or nil type is Unknown.
func FromProto(p *sppb.Type) (Type, error) {
	if p == nil {
		return TUnknown, nil
	}
	switch p.Code {
	case sppb.TypeCode_TYPE_CODE_UNSPECIFIED:
		return TUnknown, nil
	case sppb.TypeCode_BOOL:
		return TBool, nil
	case sppb.TypeCode_INT64, sppb.TypeCode_ENUM:
		return TInt64, nil
	case sppb.TypeCode_FLOAT64:
		return TFloat64, nil
	case sppb.TypeCode_FLOAT32:
		return TFloat32, nil
	case sppb.TypeCode_NUMERIC:
		return TNumeric, nil
	case sppb.TypeCode_STRING:
		return TString, nil
	case sppb.TypeCode_UUID:
		return TUUID, nil
	case sppb.TypeCode_BYTES, sppb.TypeCode_PROTO:
		return TBytes, nil
	case sppb.TypeCode_DATE:
		return TDate, nil
	case sppb.TypeCode_TIMESTAMP:
		return TTimestamp, nil
	case sppb.TypeCode_JSON:
		return TJSON, nil
	case sppb.TypeCode_ARRAY:
		e, err := FromProto(p.ArrayElementType)
		if err != nil {
			return TUnknown, err
		}
		return ArrayOf(e), nil
	case sppb.TypeCode_STRUCT:
		var fs []Field
		for _, f := range p.GetStructType().GetFields() {
			ft, err := FromProto(f.Type)
			if err != nil {
				return TUnknown, err
			}
			fs = append(fs, Field{Name: f.Name, Type: ft})
		}
		return StructOf(fs...), nil
	}
	return TUnknown, fmt.Errorf("unsupported type code %v", p.Code)
}

// Proto converts t to its wire form. Unknown becomes STRING? No: callers must resolve Unknown
// first; Proto renders it as INT64, the type Spanner gives an untyped NULL.
func (t Type) Proto() *sppb.Type {
	switch t.Code {
	case Bool:
		return &sppb.Type{Code: sppb.TypeCode_BOOL}
	case Int64, Unknown:
		return &sppb.Type{Code: sppb.TypeCode_INT64}
	case Float64:
		return &sppb.Type{Code: sppb.TypeCode_FLOAT64}
	case Float32:
		return &sppb.Type{Code: sppb.TypeCode_FLOAT32}
	case Numeric:
		return &sppb.Type{Code: sppb.TypeCode_NUMERIC}
	case String:
		return &sppb.Type{Code: sppb.TypeCode_STRING}
	case Bytes:
		return &sppb.Type{Code: sppb.TypeCode_BYTES}
	case Date:
		return &sppb.Type{Code: sppb.TypeCode_DATE}
	case Timestamp:
		return &sppb.Type{Code: sppb.TypeCode_TIMESTAMP}
	case JSON:
		return &sppb.Type{Code: sppb.TypeCode_JSON}
	case UUID:
		return &sppb.Type{Code: sppb.TypeCode_UUID}
	case Array:
		return &sppb.Type{Code: sppb.TypeCode_ARRAY, ArrayElementType: t.Elem.Proto()}
	case Struct:
		st := &sppb.StructType{}
		for _, f := range t.Fields {
			st.Fields = append(st.Fields, &sppb.StructType_Field{Name: f.Name, Type: f.Type.Proto()})
		}
		return &sppb.Type{Code: sppb.TypeCode_STRUCT, StructType: st}
	}
	return &sppb.Type{Code: sppb.TypeCode_TYPE_CODE_UNSPECIFIED}
}

// ParseScalarName maps a GoogleSQL scalar type name (case-insensitive) to its Code.
func ParseScalarName(name string) (Type, bool) {
	switch strings.ToUpper(name) {
	case "BOOL", "BOOLEAN":
		return TBool, true
	case "INT64":
		return TInt64, true
	case "FLOAT64":
		return TFloat64, true
	case "FLOAT32":
		return TFloat32, true
	case "NUMERIC":
		return TNumeric, true
	case "STRING":
		return TString, true
	case "BYTES":
		return TBytes, true
	case "DATE":
		return TDate, true
	case "TIMESTAMP":
		return TTimestamp, true
	case "JSON":
		return TJSON, true
	case "UUID":
		return TUUID, true
	}
	return TUnknown, false
}
