package spantype

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the default time zone must resolve on machines without zoneinfo
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"
)

// DefaultTimeZone is GoogleSQL's default time zone in Spanner: timestamps written without a
// zone, DATE(timestamp) and EXTRACT use it.
var DefaultTimeZone = func() *time.Location {
	loc, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		panic(err)
	}
	return loc
}()

// TimestampLayout is the storage layout of a TIMESTAMP: fixed width so that text order is time
// order.
const TimestampLayout = "2006-01-02T15:04:05.000000000Z"

// PendingCommitTimestamp is the storage value written for PENDING_COMMIT_TIMESTAMP() (and
// spanner.CommitTimestamp in a mutation) until the transaction commits and the real timestamp
// replaces it. Reading it back inside the transaction is an error, as in Spanner.
const PendingCommitTimestamp = "PENDING_COMMIT_TIMESTAMP()"

// Valid range of Spanner timestamps and dates.
var (
	MinTimestamp = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTimestamp = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// FormatTimestamp renders t in the storage layout.
func FormatTimestamp(t time.Time) string { return t.UTC().Format(TimestampLayout) }

// ParseStoredTimestamp parses a storage-form TIMESTAMP.
func ParseStoredTimestamp(s string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, s)
}

// FormatWireTimestamp renders t as the wire form: RFC 3339 in UTC with only as many fraction
// digits as needed, as Spanner returns it.
func FormatWireTimestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ParseTimestampString parses the string forms GoogleSQL accepts for a TIMESTAMP literal or a
// STRING → TIMESTAMP cast: "2020-01-02 03:04:05.123456+07:00", "2020-01-02T03:04:05Z",
// "2020-01-02 03:04:05 UTC", "2020-01-02" (midnight). Without a zone the time is in
// DefaultTimeZone (America/Los_Angeles), as in Spanner.
func ParseTimestampString(s string) (time.Time, error) {
	return ParseTimestampIn(s, DefaultTimeZone)
}

// ParseTimestampIn is ParseTimestampString with an explicit default zone.
func ParseTimestampIn(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	zoned := []string{
		time.RFC3339Nano,
		"2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02 15:04:05.999999999Z07",
		"2006-01-02 15:04:05.999999999-07",
		"2006-01-02T15:04:05.999999999-07",
		"2006-01-02 15:04Z07:00",
	}
	plain := []string{
		"2006-01-02 15:04:05.999999999",
		"2006-01-02T15:04:05.999999999",
		"2006-01-02 15:04",
		"2006-01-02T15:04",
		"2006-1-2",
	}
	up := strings.Replace(s, "t", "T", 1)
	up = strings.Replace(up, "z", "Z", 1)
	// A trailing zone name: "... UTC", "... America/New_York".
	if i := strings.LastIndex(up, " "); i > 0 && i > strings.Index(up, ":") && strings.IndexAny(up[i+1:], "0123456789") < 0 {
		l, err := time.LoadLocation(up[i+1:])
		if err != nil {
			return time.Time{}, fmt.Errorf("invalid time zone in timestamp %q", s)
		}
		loc, up = l, up[:i]
	}
	check := func(t time.Time) (time.Time, error) {
		t = t.UTC()
		if t.Before(MinTimestamp) || t.After(MaxTimestamp) {
			return time.Time{}, fmt.Errorf("timestamp %q is out of range", s)
		}
		return t, nil
	}
	for _, l := range zoned {
		if t, err := time.Parse(l, up); err == nil {
			return check(t)
		}
	}
	for _, l := range plain {
		if t, err := time.ParseInLocation(l, up, loc); err == nil {
			return check(t)
		}
	}
	return time.Time{}, fmt.Errorf("invalid timestamp: %q", s)
}

// ParseDateString parses "YYYY-M-D" (the form DATE literals and casts accept).
func ParseDateString(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	t, err := time.Parse("2006-1-2", s)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid date: %q", s)
	}
	return t, nil
}

// FormatDate renders a date in storage (and wire) form.
func FormatDate(t time.Time) string { return t.Format("2006-01-02") }

// NumericRat parses a NUMERIC string. Spanner NUMERIC has precision 38 and scale 9.
func NumericRat(s string) (*big.Rat, error) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok {
		return nil, fmt.Errorf("invalid NUMERIC value: %q", s)
	}
	return r, nil
}

var numericMax = func() *big.Rat {
	r, _ := new(big.Rat).SetString("99999999999999999999999999999.999999999")
	return r
}()

// FormatNumeric renders r in canonical storage form, rounding half away from zero to 9 decimal
// places, and fails when the value does not fit NUMERIC.
func FormatNumeric(r *big.Rat) (string, error) {
	// Round to 9 fractional digits, half away from zero.
	scaled := new(big.Rat).Mul(r, big.NewRat(1_000_000_000, 1))
	num := new(big.Int).Set(scaled.Num())
	den := scaled.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	twice := new(big.Int).Mul(new(big.Int).Abs(m), big.NewInt(2))
	if twice.Cmp(den) >= 0 {
		if num.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	rounded := new(big.Rat).SetFrac(q, big.NewInt(1_000_000_000))
	if new(big.Rat).Abs(rounded).Cmp(numericMax) > 0 {
		return "", fmt.Errorf("NUMERIC value out of range")
	}
	s := rounded.FloatString(9)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s, nil
}

// NormalizeNumeric canonicalizes a NUMERIC string.
func NormalizeNumeric(s string) (string, error) {
	r, err := NumericRat(s)
	if err != nil {
		return "", err
	}
	return FormatNumeric(r)
}

// FormatFloat renders a float the way GoogleSQL casts FLOAT64 to STRING.
func FormatFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// ToStorage converts a wire value of type t to its storage form (nil, int64, float64, string or
// []byte). It validates the value against the type.
func ToStorage(t Type, v *structpb.Value) (any, error) {
	if v == nil {
		return nil, nil
	}
	if _, ok := v.Kind.(*structpb.Value_NullValue); ok {
		return nil, nil
	}
	switch t.Code {
	case Bool:
		b, ok := v.Kind.(*structpb.Value_BoolValue)
		if !ok {
			return nil, badWire(t, v)
		}
		if b.BoolValue {
			return int64(1), nil
		}
		return int64(0), nil
	case Int64:
		s, ok := v.Kind.(*structpb.Value_StringValue)
		if !ok {
			if n, ok := v.Kind.(*structpb.Value_NumberValue); ok && n.NumberValue == math.Trunc(n.NumberValue) {
				return int64(n.NumberValue), nil
			}
			return nil, badWire(t, v)
		}
		n, err := strconv.ParseInt(s.StringValue, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("invalid INT64 value %q", s.StringValue)
		}
		return n, nil
	case Float64, Float32:
		var f float64
		switch x := v.Kind.(type) {
		case *structpb.Value_NumberValue:
			f = x.NumberValue
		case *structpb.Value_StringValue:
			switch x.StringValue {
			case "NaN":
				f = math.NaN()
			case "Infinity":
				f = math.Inf(1)
			case "-Infinity":
				f = math.Inf(-1)
			default:
				p, err := strconv.ParseFloat(x.StringValue, 64)
				if err != nil {
					return nil, fmt.Errorf("invalid %s value %q", t, x.StringValue)
				}
				f = p
			}
		default:
			return nil, badWire(t, v)
		}
		if t.Code == Float32 {
			f = float64(float32(f))
		}
		return StoreFloat(f), nil
	case Numeric:
		s, ok := v.Kind.(*structpb.Value_StringValue)
		if !ok {
			return nil, badWire(t, v)
		}
		return NormalizeNumeric(s.StringValue)
	case String:
		s, ok := v.Kind.(*structpb.Value_StringValue)
		if !ok {
			return nil, badWire(t, v)
		}
		return s.StringValue, nil
	case Bytes:
		s, ok := v.Kind.(*structpb.Value_StringValue)
		if !ok {
			return nil, badWire(t, v)
		}
		b, err := base64.StdEncoding.DecodeString(s.StringValue)
		if err != nil {
			b, err = base64.URLEncoding.DecodeString(s.StringValue)
			if err != nil {
				return nil, fmt.Errorf("invalid BYTES value: not base64")
			}
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	case Date:
		s, ok := v.Kind.(*structpb.Value_StringValue)
		if !ok {
			return nil, badWire(t, v)
		}
		d, err := ParseDateString(s.StringValue)
		if err != nil {
			return nil, err
		}
		return FormatDate(d), nil
	case Timestamp:
		s, ok := v.Kind.(*structpb.Value_StringValue)
		if !ok {
			return nil, badWire(t, v)
		}
		if s.StringValue == "spanner.commit_timestamp()" {
			return PendingCommitTimestamp, nil
		}
		ts, err := time.Parse(time.RFC3339Nano, s.StringValue)
		if err != nil {
			ts, err = ParseTimestampString(s.StringValue)
			if err != nil {
				return nil, fmt.Errorf("invalid TIMESTAMP value %q", s.StringValue)
			}
		}
		return FormatTimestamp(ts), nil
	case JSON:
		s, ok := v.Kind.(*structpb.Value_StringValue)
		if !ok {
			return nil, badWire(t, v)
		}
		return NormalizeJSON(s.StringValue)
	case UUID:
		s, ok := v.Kind.(*structpb.Value_StringValue)
		if !ok {
			return nil, badWire(t, v)
		}
		return NormalizeUUID(s.StringValue)
	case Array, Struct:
		lv, ok := v.Kind.(*structpb.Value_ListValue)
		if !ok {
			return nil, badWire(t, v)
		}
		j, err := wireToJSON(t, lv.ListValue)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(j)
		return string(b), nil
	case Unknown:
		// An untyped parameter: keep strings as strings, numbers as numbers.
		switch x := v.Kind.(type) {
		case *structpb.Value_StringValue:
			return x.StringValue, nil
		case *structpb.Value_NumberValue:
			return x.NumberValue, nil
		case *structpb.Value_BoolValue:
			if x.BoolValue {
				return int64(1), nil
			}
			return int64(0), nil
		}
	}
	return nil, badWire(t, v)
}

// NormalizeUUID parses a UUID ("0123abcd-...", upper or lower case, with or without braces or
// a urn:uuid: prefix) into its canonical lower-case form.
func NormalizeUUID(s string) (string, error) {
	u, err := uuid.Parse(strings.TrimSpace(s))
	if err != nil {
		return "", fmt.Errorf("invalid UUID value %q", s)
	}
	return u.String(), nil
}

// StoreFloat returns the storage form of a float.
func StoreFloat(f float64) any {
	if math.IsNaN(f) {
		return "NaN"
	}
	return f
}

func badWire(t Type, v *structpb.Value) error {
	return fmt.Errorf("value %s is not a valid %s", strings.TrimSpace(protoValueString(v)), t)
}

func protoValueString(v *structpb.Value) string {
	b, err := v.MarshalJSON()
	if err != nil {
		return "?"
	}
	return string(b)
}

func wireToJSON(t Type, lv *structpb.ListValue) ([]any, error) {
	out := make([]any, 0, len(lv.Values))
	switch t.Code {
	case Array:
		for _, e := range lv.Values {
			j, err := wireElemToJSON(*t.Elem, e)
			if err != nil {
				return nil, err
			}
			out = append(out, j)
		}
	case Struct:
		if len(lv.Values) != len(t.Fields) {
			return nil, fmt.Errorf("STRUCT value has %d fields, its type has %d", len(lv.Values), len(t.Fields))
		}
		for i, e := range lv.Values {
			j, err := wireElemToJSON(t.Fields[i].Type, e)
			if err != nil {
				return nil, err
			}
			out = append(out, j)
		}
	}
	return out, nil
}

func wireElemToJSON(t Type, v *structpb.Value) (any, error) {
	s, err := ToStorage(t, v)
	if err != nil {
		return nil, err
	}
	if t.Code == Array || t.Code == Struct {
		if s == nil {
			return nil, nil
		}
		return json.RawMessage(s.(string)), nil
	}
	return StorageToJSONElem(t, s), nil
}

// StorageToJSONElem converts a storage value of type t to its JSON element form.
func StorageToJSONElem(t Type, s any) any {
	if s == nil {
		return nil
	}
	switch t.Code {
	case Bool:
		return toInt(s) != 0
	case Int64:
		return toInt(s)
	case Float64, Float32:
		switch f := s.(type) {
		case float64:
			switch {
			case math.IsInf(f, 1):
				return "Infinity"
			case math.IsInf(f, -1):
				return "-Infinity"
			}
			return f
		case int64:
			return float64(f)
		case string:
			return f
		}
	case Bytes:
		switch b := s.(type) {
		case []byte:
			return base64.StdEncoding.EncodeToString(b)
		case string:
			return base64.StdEncoding.EncodeToString([]byte(b))
		}
	case Array, Struct:
		if str, ok := s.(string); ok {
			return json.RawMessage(str)
		}
	}
	switch x := s.(type) {
	case []byte:
		return string(x)
	}
	return s
}

// JSONElemToStorage converts a decoded JSON element (from encoding/json with UseNumber, or
// plain float64) of type t back to storage form.
func JSONElemToStorage(t Type, j any) (any, error) {
	if j == nil {
		return nil, nil
	}
	switch t.Code {
	case Bool:
		switch x := j.(type) {
		case bool:
			if x {
				return int64(1), nil
			}
			return int64(0), nil
		case json.Number:
			n, _ := x.Int64()
			return n, nil
		case float64:
			return int64(x), nil
		}
	case Int64:
		switch x := j.(type) {
		case json.Number:
			return x.Int64()
		case float64:
			return int64(x), nil
		case string:
			return strconv.ParseInt(x, 10, 64)
		}
	case Float64, Float32:
		switch x := j.(type) {
		case json.Number:
			f, err := x.Float64()
			return f, err
		case float64:
			return x, nil
		case string:
			switch x {
			case "NaN":
				return "NaN", nil
			case "Infinity":
				return math.Inf(1), nil
			case "-Infinity":
				return math.Inf(-1), nil
			}
		}
	case Bytes:
		if x, ok := j.(string); ok {
			return base64.StdEncoding.DecodeString(x)
		}
	case Array, Struct:
		b, err := json.Marshal(j)
		if err != nil {
			return nil, err
		}
		return string(b), nil
	default:
		if x, ok := j.(string); ok {
			return x, nil
		}
	}
	return nil, fmt.Errorf("invalid %s element %v", t, j)
}

// DecodeArray splits a storage-form ARRAY (or STRUCT) into its elements' storage values: a
// nested ARRAY or STRUCT as its storage text, a scalar as JSONElemToStorage makes it. Every
// column of an ARRAY or STRUCT type read comes through here, so it reads the text in one pass
// (arrayElements), and a scalar without allocating a decoder.
func DecodeArray(t Type, s string) ([]any, error) {
	raw, err := arrayElements(s)
	if err != nil {
		return nil, fmt.Errorf("corrupt %s value: %v", t, err)
	}
	out := make([]any, len(raw))
	for i, r := range raw {
		et := TUnknown
		if t.Code == Array {
			et = *t.Elem
		} else if i < len(t.Fields) {
			et = t.Fields[i].Type
		}
		if et.Code == Array || et.Code == Struct {
			if r != "null" {
				out[i] = r
			}
			continue
		}
		j, err := scalarJSON(r)
		if err != nil {
			return nil, err
		}
		v, err := JSONElemToStorage(et, j)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// arrayElements returns the text of each element of the JSON array s (none for null), white
// space around them left out; an error if s is not one JSON array (or null).
func arrayElements(s string) ([]string, error) {
	if !json.Valid([]byte(s)) {
		return nil, fmt.Errorf("not JSON: %.40q", s)
	}
	s = strings.TrimSpace(s)
	if s == "null" {
		return nil, nil
	}
	if s[0] != '[' {
		return nil, fmt.Errorf("not an array: %.40q", s)
	}
	// s is valid JSON: an element ends at a comma or the closing bracket outside any string or
	// nested value.
	var out []string
	depth, start, inString := 0, 1, false
	for i := 1; i < len(s); i++ {
		c := s[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
		case ']', '}':
			if depth > 0 {
				depth--
				continue
			}
			if e := strings.TrimSpace(s[start:i]); e != "" || len(out) > 0 {
				out = append(out, e)
			}
			return out, nil
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return nil, fmt.Errorf("unterminated array: %.40q", s)
}

// scalarJSON is the value of the JSON text r as a json.Decoder with UseNumber gives it: nil,
// a bool, a string or a json.Number (r is valid JSON: arrayElements checked it).
func scalarJSON(r string) (any, error) {
	switch r[0] {
	case 'n':
		return nil, nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case '"':
		if body := r[1 : len(r)-1]; strings.IndexByte(body, '\\') < 0 && utf8.ValidString(body) {
			return body, nil
		}
		var str string
		err := json.Unmarshal([]byte(r), &str)
		return str, err
	case '{', '[':
		d := json.NewDecoder(strings.NewReader(r))
		d.UseNumber()
		var j any
		err := d.Decode(&j)
		return j, err
	}
	return json.Number(r), nil
}

// EncodeArray builds a storage-form ARRAY (or STRUCT) from element storage values.
func EncodeArray(t Type, elems []any) string {
	js := make([]any, len(elems))
	for i, e := range elems {
		et := TUnknown
		if t.Code == Array {
			et = *t.Elem
		} else if i < len(t.Fields) {
			et = t.Fields[i].Type
		}
		js[i] = StorageToJSONElem(et, e)
	}
	b, _ := json.Marshal(js)
	return string(b)
}

// FromStorage converts a storage value of type t to its wire form.
func FromStorage(t Type, s any) (*structpb.Value, error) {
	if s == nil {
		return structpb.NewNullValue(), nil
	}
	switch t.Code {
	case Bool:
		return structpb.NewBoolValue(toInt(s) != 0), nil
	case Int64, Unknown:
		switch x := s.(type) {
		case int64:
			return structpb.NewStringValue(strconv.FormatInt(x, 10)), nil
		case float64:
			return structpb.NewStringValue(strconv.FormatInt(int64(x), 10)), nil
		case string:
			return structpb.NewStringValue(x), nil
		}
	case Float64, Float32:
		var f float64
		switch x := s.(type) {
		case float64:
			f = x
		case int64:
			f = float64(x)
		case string:
			if x == "NaN" {
				return structpb.NewStringValue("NaN"), nil
			}
			p, err := strconv.ParseFloat(x, 64)
			if err != nil {
				return nil, fmt.Errorf("corrupt FLOAT64 %q", x)
			}
			f = p
		}
		switch {
		case math.IsNaN(f):
			return structpb.NewStringValue("NaN"), nil
		case math.IsInf(f, 1):
			return structpb.NewStringValue("Infinity"), nil
		case math.IsInf(f, -1):
			return structpb.NewStringValue("-Infinity"), nil
		}
		if t.Code == Float32 {
			f = float64(float32(f))
		}
		return structpb.NewNumberValue(f), nil
	case Bytes:
		switch x := s.(type) {
		case []byte:
			return structpb.NewStringValue(base64.StdEncoding.EncodeToString(x)), nil
		case string:
			return structpb.NewStringValue(base64.StdEncoding.EncodeToString([]byte(x))), nil
		}
	case Timestamp:
		str := StorageString(s)
		if str == PendingCommitTimestamp {
			return nil, ErrPendingCommitTimestamp
		}
		ts, err := ParseStoredTimestamp(str)
		if err != nil {
			return nil, fmt.Errorf("corrupt TIMESTAMP %q", str)
		}
		return structpb.NewStringValue(FormatWireTimestamp(ts)), nil
	case Numeric, String, Date, JSON, UUID:
		return structpb.NewStringValue(StorageString(s)), nil
	case Array, Struct:
		elems, err := DecodeArray(t, StorageString(s))
		if err != nil {
			return nil, err
		}
		vals := make([]*structpb.Value, len(elems))
		for i, e := range elems {
			et := TUnknown
			if t.Code == Array {
				et = *t.Elem
			} else if i < len(t.Fields) {
				et = t.Fields[i].Type
			}
			v, err := FromStorage(et, e)
			if err != nil {
				return nil, err
			}
			vals[i] = v
		}
		return structpb.NewListValue(&structpb.ListValue{Values: vals}), nil
	}
	return nil, fmt.Errorf("cannot encode %T as %s", s, t)
}

// ErrPendingCommitTimestamp is returned when a value written with PENDING_COMMIT_TIMESTAMP() is
// read back in the same transaction.
var ErrPendingCommitTimestamp = fmt.Errorf("cannot read a column whose value is a pending commit timestamp (written with PENDING_COMMIT_TIMESTAMP() or spanner.CommitTimestamp) in the same transaction")

func toInt(s any) int64 {
	switch x := s.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case bool:
		if x {
			return 1
		}
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// StorageString renders a storage value as text (the storage form of STRING-like types, or the
// decimal form of a number).
func StorageString(s any) string {
	switch x := s.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(s)
}
