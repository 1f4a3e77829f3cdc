package sqlfuncs

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones must work on machines without a zoneinfo database
	"unicode/utf8"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

func init() {
	defLax("spf_cast", 3, func(args []driver.Value) (driver.Value, error) { return runCast(args, false) })
	defLax("spf_safe_cast", 3, func(args []driver.Value) (driver.Value, error) { return runCast(args, true) })
}

func runCast(args []driver.Value, safe bool) (driver.Value, error) {
	if args[0] == nil {
		return nil, nil
	}
	from, err := parseTag(asString(args[1]))
	if err != nil {
		return nil, err
	}
	to, err := parseTag(asString(args[2]))
	if err != nil {
		return nil, err
	}
	v, err := castValue(args[0], from, to)
	if err != nil {
		if safe {
			return nil, nil
		}
		return nil, err
	}
	return v, nil
}

// castSQL renders CAST(sql AS to) for a value of type from.
func castSQL(sql string, from, to spantype.Type, safe bool) string {
	// SQLite converts exactly where GoogleSQL cannot fail; skip the Go call there.
	switch {
	case from.Code == spantype.Int64 && to.Code == spantype.Float64:
		return "CAST(" + sql + " AS REAL)"
	case from.Code == spantype.Int64 && (to.Code == spantype.Numeric || to.Code == spantype.String):
		return "CAST(" + sql + " AS TEXT)"
	}
	fn := "spf_cast"
	if safe {
		fn = "spf_safe_cast"
	}
	return sqlCall(fn, sql, tagSQL(from), tagSQL(to))
}

// castable reports whether GoogleSQL has an explicit CAST from → to.
func castable(from, to spantype.Type) bool {
	if from.Code == spantype.Unknown || from.Equal(to) {
		return true
	}
	f, t := from.Code, to.Code
	scalar := map[spantype.Code][]spantype.Code{
		spantype.Bool:      {spantype.Int64, spantype.String},
		spantype.Int64:     {spantype.Bool, spantype.Float64, spantype.Float32, spantype.Numeric, spantype.String},
		spantype.Float64:   {spantype.Int64, spantype.Float32, spantype.Numeric, spantype.String},
		spantype.Float32:   {spantype.Int64, spantype.Float64, spantype.Numeric, spantype.String},
		spantype.Numeric:   {spantype.Int64, spantype.Float64, spantype.Float32, spantype.String},
		spantype.String:    {spantype.Bool, spantype.Int64, spantype.Float64, spantype.Float32, spantype.Numeric, spantype.Bytes, spantype.Date, spantype.Timestamp, spantype.UUID},
		spantype.UUID:      {spantype.String},
		spantype.Bytes:     {spantype.String},
		spantype.Date:      {spantype.String, spantype.Timestamp},
		spantype.Timestamp: {spantype.String, spantype.Date},
	}
	for _, c := range scalar[f] {
		if c == t {
			return true
		}
	}
	switch {
	case f == spantype.Array && t == spantype.Array:
		return castable(*from.Elem, *to.Elem)
	case f == spantype.Struct && t == spantype.Struct && len(from.Fields) == len(to.Fields):
		for i := range from.Fields {
			if !castable(from.Fields[i].Type, to.Fields[i].Type) {
				return false
			}
		}
		return true
	}
	return false
}

// Cast translates CAST (safe=false) and SAFE_CAST (safe=true).
func Cast(x Arg, to spantype.Type, safe bool) (Arg, error) {
	to = stripLength(to)
	if !castable(x.Type, to) {
		return Arg{}, errorf("Invalid cast from %s to %s", x.Type, to)
	}
	out := Arg{Type: to, IsNullLiteral: x.IsNullLiteral}
	switch {
	case x.Type.Code == spantype.Unknown || x.Type.Equal(to):
		out.SQL = x.SQL
	case x.StringLiteral != nil:
		// Cast literals now, so a bad literal is reported before the statement runs, as Spanner
		// does; SAFE_CAST of a bad literal is NULL.
		v, err := castValue(*x.StringLiteral, spantype.TString, to)
		if err != nil {
			if !safe {
				return Arg{}, errorf("Could not cast literal %q to type %s", *x.StringLiteral, to)
			}
			v = nil
		}
		out.SQL = storageLiteral(v)
	default:
		out.SQL = castSQL(x.SQL, x.Type, to, safe)
	}
	return out, nil
}

var decimalRE = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)

// castValue converts a non-NULL storage value of type from to type to.
func castValue(v driver.Value, from, to spantype.Type) (driver.Value, error) {
	if v == nil {
		return nil, nil
	}
	if from.Equal(to) || from.Code == spantype.Unknown {
		return v, nil
	}
	switch {
	case to.Code == spantype.UUID && from.Code == spantype.String:
		u, err := spantype.NormalizeUUID(asString(v))
		if err != nil {
			return nil, outOfRange("Invalid input to UUID: %q", asString(v))
		}
		return u, nil
	case to.Code == spantype.String && from.Code == spantype.UUID:
		return asString(v), nil
	}
	switch to.Code {
	case spantype.Bool:
		switch from.Code {
		case spantype.Int64:
			n, err := asInt(v)
			return boolValue(n != 0), err
		case spantype.String:
			switch strings.ToLower(strings.TrimSpace(asString(v))) {
			case "true":
				return int64(1), nil
			case "false":
				return int64(0), nil
			}
			return nil, outOfRange("Bad bool value: %s", asString(v))
		}
	case spantype.Int64:
		switch from.Code {
		case spantype.Bool:
			return asInt(v)
		case spantype.Float64, spantype.Float32:
			f, err := asFloat(v)
			if err != nil {
				return nil, err
			}
			return floatToInt(f)
		case spantype.Numeric:
			r, err := asNumeric(v)
			if err != nil {
				return nil, err
			}
			return ratToInt(r)
		case spantype.String:
			return parseInt64(asString(v))
		}
	case spantype.Float64, spantype.Float32:
		var f float64
		switch from.Code {
		case spantype.Int64, spantype.Float64, spantype.Float32:
			x, err := asFloat(v)
			if err != nil {
				return nil, err
			}
			f = x
		case spantype.Numeric:
			r, err := asNumeric(v)
			if err != nil {
				return nil, err
			}
			f, _ = r.Float64()
		case spantype.String:
			x, err := strconv.ParseFloat(strings.TrimSpace(asString(v)), 64)
			if err != nil && !isRangeErr(err) {
				return nil, outOfRange("Bad double value: %s", asString(v))
			}
			f = x
		default:
			return nil, internalErr("Invalid cast from %s to %s", from, to)
		}
		if to.Code == spantype.Float32 {
			f = float64(float32(f))
		}
		return storeFloat(f), nil
	case spantype.Numeric:
		switch from.Code {
		case spantype.Int64:
			r, err := asNumeric(v)
			if err != nil {
				return nil, err
			}
			return storeNumeric(r)
		case spantype.Float64, spantype.Float32:
			f, err := asFloat(v)
			if err != nil {
				return nil, err
			}
			r, err := asNumeric(f)
			if err != nil {
				return nil, err
			}
			return storeNumeric(r)
		case spantype.String:
			s := strings.TrimSpace(asString(v))
			if !decimalRE.MatchString(s) {
				return nil, outOfRange("Invalid NUMERIC value: %s", asString(v))
			}
			r, _ := new(big.Rat).SetString(s)
			return storeNumeric(r)
		}
	case spantype.String:
		return castToString(v, from)
	case spantype.Bytes:
		if from.Code == spantype.String {
			return asBytes(v), nil
		}
	case spantype.Date:
		switch from.Code {
		case spantype.String:
			d, err := spantype.ParseDateString(asString(v))
			if err != nil || d.Year() < 1 || d.Year() > 9999 {
				return nil, outOfRange("Invalid date: %q", asString(v))
			}
			return spantype.FormatDate(d), nil
		case spantype.Timestamp:
			t, err := asTime(v)
			if err != nil {
				return nil, err
			}
			return spantype.FormatDate(t.In(spantype.DefaultTimeZone)), nil
		}
	case spantype.Timestamp:
		switch from.Code {
		case spantype.String:
			t, err := parseTimestamp(asString(v), spantype.DefaultTimeZone)
			if err != nil {
				return nil, err
			}
			return spantype.FormatTimestamp(t), nil
		case spantype.Date:
			d, err := asDate(v)
			if err != nil {
				return nil, err
			}
			return storeTime(time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, spantype.DefaultTimeZone))
		}
	case spantype.Array:
		if from.Code != spantype.Array {
			break
		}
		elems, err := spantype.DecodeArray(from, asString(v))
		if err != nil {
			return nil, internalErr("%v", err)
		}
		for i, e := range elems {
			if elems[i], err = castValue(e, *from.Elem, *to.Elem); err != nil {
				return nil, err
			}
		}
		return spantype.EncodeArray(to, elems), nil
	case spantype.Struct:
		if from.Code != spantype.Struct || len(from.Fields) != len(to.Fields) {
			break
		}
		elems, err := spantype.DecodeArray(from, asString(v))
		if err != nil {
			return nil, internalErr("%v", err)
		}
		for i, e := range elems {
			if elems[i], err = castValue(e, from.Fields[i].Type, to.Fields[i].Type); err != nil {
				return nil, err
			}
		}
		return spantype.EncodeArray(to, elems), nil
	}
	return nil, internalErr("Invalid cast from %s to %s", from, to)
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func castToString(v driver.Value, from spantype.Type) (driver.Value, error) {
	switch from.Code {
	case spantype.Bool:
		n, err := asInt(v)
		if err != nil {
			return nil, err
		}
		if n != 0 {
			return "true", nil
		}
		return "false", nil
	case spantype.Int64:
		n, err := asInt(v)
		return strconv.FormatInt(n, 10), err
	case spantype.Float64, spantype.Float32:
		f, err := asFloat(v)
		bits := 64
		if from.Code == spantype.Float32 {
			bits = 32
		}
		return formatFloatString(f, bits), err
	case spantype.Numeric, spantype.Date:
		return asString(v), nil
	case spantype.Bytes:
		b := asBytes(v)
		if !utf8.Valid(b) {
			return nil, outOfRange("Invalid UTF-8 string: cannot cast BYTES to STRING")
		}
		return string(b), nil
	case spantype.Timestamp:
		t, err := asTime(v)
		if err != nil {
			return nil, err
		}
		return formatTimestampString(t, spantype.DefaultTimeZone), nil
	}
	return nil, internalErr("Invalid cast from %s to STRING", from)
}

// formatTimestampString renders t as CAST(t AS STRING) does: in zone loc, with the fraction
// trimmed to milli-, micro- or nanoseconds and the offset as +HH or +HH:MM.
func formatTimestampString(t time.Time, loc *time.Location) string {
	t = t.In(loc)
	var b strings.Builder
	b.WriteString(t.Format("2006-01-02 15:04:05"))
	b.WriteString(fractionString(t.Nanosecond()))
	_, off := t.Zone()
	sign := '+'
	if off < 0 {
		sign, off = '-', -off
	}
	fmt.Fprintf(&b, "%c%02d", sign, off/3600)
	if m := off % 3600 / 60; m != 0 {
		fmt.Fprintf(&b, ":%02d", m)
	}
	return b.String()
}

// fractionString renders nanoseconds as "", ".mmm", ".mmmuuu" or ".mmmuuunnn".
func fractionString(ns int) string {
	switch {
	case ns == 0:
		return ""
	case ns%1_000_000 == 0:
		return fmt.Sprintf(".%03d", ns/1_000_000)
	case ns%1_000 == 0:
		return fmt.Sprintf(".%06d", ns/1_000)
	}
	return fmt.Sprintf(".%09d", ns)
}

func storeTime(t time.Time) (driver.Value, error) {
	if t.Before(spantype.MinTimestamp) || t.After(spantype.MaxTimestamp) {
		return nil, outOfRange("Timestamp overflow")
	}
	return spantype.FormatTimestamp(t), nil
}

var timestampRE = regexp.MustCompile(`^(\d{1,4}-\d{1,2}-\d{1,2})(?:[ Tt](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?(?:\s*(Z|z|[+-]\d{1,2}(?::?\d{2})?)|\s+([A-Za-z_][A-Za-z_/+\-0-9]*))?$`)

// parseTimestamp parses a timestamp string as GoogleSQL does: "YYYY-[M]M-[D]D[( |T)HH:MM[:SS[.F]]]"
// followed by an optional zone (Z, +HH[:MM], or a zone name after a space); no zone means loc.
func parseTimestamp(s string, loc *time.Location) (time.Time, error) {
	bad := outOfRange("Invalid timestamp: '%s'", s)
	m := timestampRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return time.Time{}, bad
	}
	zone := loc
	if z := m[6] + m[7]; z != "" {
		var err error
		if zone, err = parseZone(z); err != nil {
			return time.Time{}, bad
		}
	}
	d, err := time.Parse("2006-1-2", m[1])
	if err != nil {
		return time.Time{}, bad
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	h, mi, sec := atoi(m[2]), atoi(m[3]), atoi(m[4])
	if h > 23 || mi > 59 || sec > 59 {
		return time.Time{}, bad
	}
	ns := 0
	if f := m[5]; f != "" {
		ns = atoi(f) * int(math.Pow10(9-len(f)))
	}
	t := time.Date(d.Year(), d.Month(), d.Day(), h, mi, sec, ns, zone).UTC()
	if t.Before(spantype.MinTimestamp) || t.After(spantype.MaxTimestamp) {
		return time.Time{}, outOfRange("Timestamp out of range: %s", s)
	}
	return t, nil
}

// parseZone parses a time zone argument: a name ("America/New_York", "UTC") or an offset
// ("+07", "-08:00", "+0530", "Z").
func parseZone(z string) (*time.Location, error) {
	z = strings.TrimSpace(z)
	switch strings.ToUpper(z) {
	case "Z", "UTC":
		return time.UTC, nil
	}
	if strings.HasPrefix(strings.ToUpper(z), "UTC") && len(z) > 3 && (z[3] == '+' || z[3] == '-') {
		z = z[3:]
	}
	if z != "" && (z[0] == '+' || z[0] == '-') {
		digits := strings.ReplaceAll(z[1:], ":", "")
		var h, m int
		var err error
		switch len(digits) {
		case 1, 2:
			h, err = strconv.Atoi(digits)
		case 3, 4:
			h, err = strconv.Atoi(digits[:len(digits)-2])
			if err == nil {
				m, err = strconv.Atoi(digits[len(digits)-2:])
			}
		default:
			err = fmt.Errorf("bad offset")
		}
		if err != nil || h > 14 || m > 59 {
			return nil, outOfRange("Invalid time zone: %s", z)
		}
		off := h*3600 + m*60
		if z[0] == '-' {
			off = -off
		}
		return time.FixedZone(z, off), nil
	}
	loc, err := time.LoadLocation(z)
	if err != nil || z == "" || z == "Local" {
		return nil, outOfRange("Invalid time zone: %s", z)
	}
	return loc, nil
}

// parseInt64 parses a STRING → INT64 cast: decimal or 0x hex, with an optional sign.
func parseInt64(s string) (driver.Value, error) {
	t := strings.TrimSpace(s)
	neg := false
	body := t
	if strings.HasPrefix(body, "-") || strings.HasPrefix(body, "+") {
		neg = body[0] == '-'
		body = body[1:]
	}
	var u uint64
	var err error
	if strings.HasPrefix(body, "0x") || strings.HasPrefix(body, "0X") {
		u, err = strconv.ParseUint(body[2:], 16, 64)
	} else if body != "" && body[0] >= '0' && body[0] <= '9' {
		u, err = strconv.ParseUint(body, 10, 64)
	} else {
		err = fmt.Errorf("bad")
	}
	if err != nil {
		if isRangeErr(err) {
			return nil, outOfRange("Bad int64 value: %s", s)
		}
		return nil, outOfRange("Bad int64 value: %s", s)
	}
	if neg {
		if u > 1<<63 {
			return nil, outOfRange("Bad int64 value: %s", s)
		}
		return -int64(u), nil
	}
	if u > math.MaxInt64 {
		return nil, outOfRange("Bad int64 value: %s", s)
	}
	return int64(u), nil
}

// floatToInt rounds half away from zero and checks the INT64 range.
func floatToInt(f float64) (driver.Value, error) {
	r := math.Round(f)
	if math.IsNaN(r) || r < -9.223372036854775808e18 || r >= 9.223372036854775808e18 {
		return nil, outOfRange("int64 out of range: %s", spantype.FormatFloat(f, 64))
	}
	return int64(r), nil
}

// ratToInt rounds half away from zero and checks the INT64 range.
func ratToInt(r *big.Rat) (driver.Value, error) {
	i := roundRat(r, 0)
	if !i.IsInt64() {
		return nil, outOfRange("int64 out of range: %s", r.FloatString(9))
	}
	return i.Int64(), nil
}

// roundRat rounds r to digits decimal places half away from zero and returns the result scaled
// by 10^digits.
func roundRat(r *big.Rat, digits int) *big.Int {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil)
	scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(scale))
	q, m := new(big.Int).QuoRem(scaled.Num(), scaled.Denom(), new(big.Int))
	if new(big.Int).Mul(new(big.Int).Abs(m), big.NewInt(2)).Cmp(scaled.Denom()) >= 0 {
		if scaled.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

// floatLiteral renders f as a SQLite REAL literal (or the NaN storage text).
func floatLiteral(f float64) string {
	switch {
	case math.IsNaN(f):
		return "'NaN'"
	case math.IsInf(f, 1):
		return "9e999"
	case math.IsInf(f, -1):
		return "-9e999"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// jsonText marshals v without HTML escaping.
func jsonText(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// formatFloatString renders a float as CAST(x AS STRING) does: %g with 15 significant digits
// (6 for FLOAT32) when that round-trips, else 17 (9), so 1e6 is "1000000", 1e15 is "1e+15"
// and 0.1 is "0.1".
func formatFloatString(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	short, long := 15, 17
	if bits == 32 {
		short, long = 6, 9
	}
	s := strconv.FormatFloat(f, 'g', short, bits)
	if back, err := strconv.ParseFloat(s, bits); err != nil || back != f {
		s = strconv.FormatFloat(f, 'g', long, bits)
	}
	return s
}
