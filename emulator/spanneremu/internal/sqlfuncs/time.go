package sqlfuncs

import (
	"database/sql/driver"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// Date and time functions. Parts (DAY, MONTH, ...) arrive as upper-cased STRING literal
// arguments; they are checked at translation time and passed to Go as SQL string literals.

var partNanos = map[string]int64{
	"NANOSECOND":  1,
	"MICROSECOND": 1_000,
	"MILLISECOND": 1_000_000,
	"SECOND":      1_000_000_000,
	"MINUTE":      60 * 1_000_000_000,
	"HOUR":        3600 * 1_000_000_000,
	"DAY":         86400 * 1_000_000_000,
}

// partArg returns the upper-cased part name of a part argument, which must be a literal.
func partArg(c Call, a Arg, allowed ...string) (string, error) {
	if a.StringLiteral == nil {
		return "", errorf("%s requires a date part literal", c.Name)
	}
	part := strings.ToUpper(*a.StringLiteral)
	for _, p := range allowed {
		if p == part {
			return part, nil
		}
	}
	return "", errorf("Unsupported date part %s for function %s", part, c.Name)
}

var (
	timestampAddParts = []string{"NANOSECOND", "MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY"}
	dateAddParts      = []string{"DAY", "WEEK", "MONTH", "QUARTER", "YEAR"}
	dateDiffParts     = []string{"DAY", "WEEK", "ISOWEEK", "MONTH", "QUARTER", "YEAR", "ISOYEAR"}
	dateTruncParts    = []string{"DAY", "WEEK", "ISOWEEK", "MONTH", "QUARTER", "YEAR", "ISOYEAR"}
	timestampTrunc    = append([]string{"NANOSECOND", "MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR"}, dateTruncParts...)
)

func zoneValue(v driver.Value) (*time.Location, error) {
	if v == nil {
		return spantype.DefaultTimeZone, nil
	}
	return parseZone(asString(v))
}

// optionalZone appends the zone argument's SQL, or NULL for the default zone.
func optionalZone(args []Arg, i int) string {
	if i < len(args) {
		return args[i].SQL
	}
	return "NULL"
}

func init() {
	scalars["CURRENT_TIMESTAMP"] = func(c Call) (Arg, error) {
		if len(c.Args) != 0 {
			return Arg{}, arity(c, "0")
		}
		return Arg{SQL: "spf_current_timestamp()", Type: tT}, nil
	}
	scalarFuncs = append(scalarFuncs, goFunc{name: "spf_current_timestamp", nargs: 0, volatile: true,
		fn: func([]driver.Value) (driver.Value, error) { return spantype.FormatTimestamp(time.Now()), nil }})
	defFunc("CURRENT_DATE", sig(tD, goCall("spf_current_date"), tS).opt(1))
	scalarFuncs = append(scalarFuncs, goFunc{name: "spf_current_date", nargs: -1, volatile: true,
		fn: func(a []driver.Value) (driver.Value, error) {
			var z driver.Value
			if len(a) > 0 {
				z = a[0]
			}
			loc, err := zoneValue(z)
			if err != nil {
				return nil, err
			}
			return spantype.FormatDate(time.Now().In(loc)), nil
		}})

	defFunc("TIMESTAMP",
		sig(tT, goCall("spf_timestamp_from_string"), tS, tS).opt(1),
		sig(tT, goCall("spf_timestamp_from_date"), tD, tS).opt(1),
		sig(tT, func(a []Arg) string { return a[0].SQL }, tT))
	defStrict("spf_timestamp_from_string", -1, func(a []driver.Value) (driver.Value, error) {
		loc := spantype.DefaultTimeZone
		if len(a) > 1 {
			var err error
			if loc, err = zoneValue(a[1]); err != nil {
				return nil, err
			}
		}
		t, err := parseTimestamp(asString(a[0]), loc)
		if err != nil {
			return nil, err
		}
		return spantype.FormatTimestamp(t), nil
	})
	defStrict("spf_timestamp_from_date", -1, func(a []driver.Value) (driver.Value, error) {
		loc := spantype.DefaultTimeZone
		if len(a) > 1 {
			var err error
			if loc, err = zoneValue(a[1]); err != nil {
				return nil, err
			}
		}
		d, err := asDate(a[0])
		if err != nil {
			return nil, err
		}
		return storeTime(time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, loc))
	})

	defFunc("DATE",
		sig(tD, goCall("spf_date_ymd"), tI, tI, tI),
		sig(tD, goCall("spf_date_from_timestamp"), tT, tS).opt(1),
		sig(tD, func(a []Arg) string { return a[0].SQL }, tD),
		sig(tD, func(a []Arg) string { return castSQL(a[0].SQL, tS, tD, false) }, tS))
	defStrict("spf_date_ymd", 3, func(a []driver.Value) (driver.Value, error) {
		var n [3]int64
		for i := range n {
			var err error
			if n[i], err = asInt(a[i]); err != nil {
				return nil, err
			}
		}
		d := time.Date(int(n[0]), time.Month(n[1]), int(n[2]), 0, 0, 0, 0, time.UTC)
		if d.Year() != int(n[0]) || int64(d.Month()) != n[1] || int64(d.Day()) != n[2] {
			return nil, outOfRange("Invalid date: %d-%d-%d", n[0], n[1], n[2])
		}
		return storeDate(d)
	})
	defStrict("spf_date_from_timestamp", -1, func(a []driver.Value) (driver.Value, error) {
		t, loc, err := timeAndZone(a)
		if err != nil {
			return nil, err
		}
		return spantype.FormatDate(t.In(loc)), nil
	})

	for _, name := range []string{"TIMESTAMP_ADD", "TIMESTAMP_SUB"} {
		scalars[name] = func(c Call) (Arg, error) {
			if len(c.Args) != 3 {
				return Arg{}, arity(c, "3")
			}
			part, err := partArg(c, c.Args[2], timestampAddParts...)
			if err != nil {
				return Arg{}, err
			}
			return resolve(Call{Name: name, Args: c.Args[:2]}, []overload{
				sig(tT, func(a []Arg) string {
					return sqlCall("spf_timestamp_add", a[0].SQL, a[1].SQL, sqlString(part), sqlString(name))
				}, tT, tI)})
		}
	}
	defStrict("spf_timestamp_add", 4, func(a []driver.Value) (driver.Value, error) {
		t, err := asTime(a[0])
		if err != nil {
			return nil, err
		}
		n, err := asInt(a[1])
		if err != nil {
			return nil, err
		}
		unit := partNanos[asString(a[2])]
		if asString(a[3]) == "TIMESTAMP_SUB" {
			n = -n
		}
		d := new(big.Int).Mul(big.NewInt(n), big.NewInt(unit))
		if !d.IsInt64() {
			return nil, outOfRange("Timestamp overflow")
		}
		secs, nanos := d.Int64()/1e9, d.Int64()%1e9
		return storeTime(t.Add(time.Duration(secs) * time.Second).Add(time.Duration(nanos)))
	})

	scalars["TIMESTAMP_DIFF"] = func(c Call) (Arg, error) {
		if len(c.Args) != 3 {
			return Arg{}, arity(c, "3")
		}
		part, err := partArg(c, c.Args[2], timestampAddParts...)
		if err != nil {
			return Arg{}, err
		}
		return resolve(Call{Name: c.Name, Args: c.Args[:2]}, []overload{sig(tI, func(a []Arg) string {
			return sqlCall("spf_timestamp_diff", a[0].SQL, a[1].SQL, sqlString(part))
		}, tT, tT)})
	}
	defStrict("spf_timestamp_diff", 3, func(a []driver.Value) (driver.Value, error) {
		x, err := asTime(a[0])
		if err != nil {
			return nil, err
		}
		y, err := asTime(a[1])
		if err != nil {
			return nil, err
		}
		diff := new(big.Int).Sub(unixNanos(x), unixNanos(y))
		q := new(big.Int).Quo(diff, big.NewInt(partNanos[asString(a[2])]))
		if !q.IsInt64() {
			return nil, outOfRange("TIMESTAMP_DIFF overflow")
		}
		return q.Int64(), nil
	})

	scalars["TIMESTAMP_TRUNC"] = func(c Call) (Arg, error) {
		if len(c.Args) != 2 && len(c.Args) != 3 {
			return Arg{}, arity(c, "2 or 3")
		}
		part, err := partArg(c, c.Args[1], timestampTrunc...)
		if err != nil {
			return Arg{}, err
		}
		args := append([]Arg{c.Args[0]}, c.Args[2:]...)
		return resolve(Call{Name: c.Name, Args: args}, []overload{sig(tT, func(a []Arg) string {
			return sqlCall("spf_timestamp_trunc", a[0].SQL, sqlString(part), optionalZone(a, 1))
		}, tT, tS).opt(1)})
	}
	defLax("spf_timestamp_trunc", 3, func(a []driver.Value) (driver.Value, error) {
		if a[0] == nil {
			return nil, nil
		}
		t, err := asTime(a[0])
		if err != nil {
			return nil, err
		}
		loc, err := zoneValue(a[2])
		if err != nil {
			return nil, err
		}
		part := asString(a[1])
		if n, ok := partNanos[part]; ok && part != "DAY" {
			// Sub-day units truncate on the absolute time line (every zone offset in use is a
			// whole number of minutes, so MINUTE and coarser agree with local truncation except
			// HOUR in half-hour zones, handled below).
			if part == "HOUR" {
				lt := t.In(loc)
				return storeTime(time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), 0, 0, 0, loc))
			}
			ns := unixNanos(t)
			m := new(big.Int).Mod(ns, big.NewInt(n))
			return storeTime(t.Add(-time.Duration(m.Int64())))
		}
		lt := t.In(loc)
		d := truncDate(time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, time.UTC), part)
		return storeTime(time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, loc))
	})

	for _, name := range []string{"DATE_ADD", "DATE_SUB"} {
		scalars[name] = func(c Call) (Arg, error) {
			if len(c.Args) != 3 {
				return Arg{}, arity(c, "3")
			}
			part, err := partArg(c, c.Args[2], dateAddParts...)
			if err != nil {
				return Arg{}, err
			}
			return resolve(Call{Name: name, Args: c.Args[:2]}, []overload{
				sig(tD, func(a []Arg) string {
					return sqlCall("spf_date_add", a[0].SQL, a[1].SQL, sqlString(part), sqlString(name))
				}, tD, tI)})
		}
	}
	defStrict("spf_date_add", 4, func(a []driver.Value) (driver.Value, error) {
		d, err := asDate(a[0])
		if err != nil {
			return nil, err
		}
		n, err := asInt(a[1])
		if err != nil {
			return nil, err
		}
		if asString(a[3]) == "DATE_SUB" {
			n = -n
		}
		if n > 4_000_000 || n < -4_000_000 {
			return nil, outOfRange("Date overflow")
		}
		return storeDate(addDate(d, int(n), asString(a[2])))
	})

	scalars["DATE_DIFF"] = func(c Call) (Arg, error) {
		if len(c.Args) != 3 {
			return Arg{}, arity(c, "3")
		}
		part, err := partArg(c, c.Args[2], dateDiffParts...)
		if err != nil {
			return Arg{}, err
		}
		return resolve(Call{Name: c.Name, Args: c.Args[:2]}, []overload{sig(tI, func(a []Arg) string {
			return sqlCall("spf_date_diff", a[0].SQL, a[1].SQL, sqlString(part))
		}, tD, tD)})
	}
	defStrict("spf_date_diff", 3, func(a []driver.Value) (driver.Value, error) {
		x, err := asDate(a[0])
		if err != nil {
			return nil, err
		}
		y, err := asDate(a[1])
		if err != nil {
			return nil, err
		}
		return dateDiff(x, y, asString(a[2])), nil
	})

	scalars["DATE_TRUNC"] = func(c Call) (Arg, error) {
		if len(c.Args) != 2 {
			return Arg{}, arity(c, "2")
		}
		part, err := partArg(c, c.Args[1], dateTruncParts...)
		if err != nil {
			return Arg{}, err
		}
		return resolve(Call{Name: c.Name, Args: c.Args[:1]}, []overload{sig(tD, func(a []Arg) string {
			return sqlCall("spf_date_trunc", a[0].SQL, sqlString(part))
		}, tD)})
	}
	defStrict("spf_date_trunc", 2, func(a []driver.Value) (driver.Value, error) {
		d, err := asDate(a[0])
		if err != nil {
			return nil, err
		}
		return storeDate(truncDate(d, asString(a[1])))
	})

	unixFns := map[string]int64{"UNIX_SECONDS": 1e9, "UNIX_MILLIS": 1e6, "UNIX_MICROS": 1e3, "UNIX_NANOS": 1}
	for name, unit := range unixFns {
		goName := "spf_" + strings.ToLower(name)
		defFunc(name, sig(tI, goCall(goName), tT))
		defStrict(goName, 1, func(a []driver.Value) (driver.Value, error) {
			t, err := asTime(a[0])
			if err != nil {
				return nil, err
			}
			// Floor, not truncation: UNIX_SECONDS of 1969-12-31 23:59:59.5 is -1.
			return new(big.Int).Div(unixNanos(t), big.NewInt(unit)).Int64(), nil
		})
		from := "TIMESTAMP_" + strings.TrimPrefix(name, "UNIX_")
		fromGo := "spf_" + strings.ToLower(from)
		defFunc(from, sig(tT, goCall(fromGo), tI))
		defStrict(fromGo, 1, func(a []driver.Value) (driver.Value, error) {
			n, err := asInt(a[0])
			if err != nil {
				return nil, err
			}
			ns := new(big.Int).Mul(big.NewInt(n), big.NewInt(unit))
			sec := new(big.Int)
			rem := new(big.Int)
			sec.DivMod(ns, big.NewInt(1e9), rem)
			if !sec.IsInt64() {
				return nil, outOfRange("Timestamp overflow")
			}
			return storeTime(time.Unix(sec.Int64(), rem.Int64()).UTC())
		})
	}
	defFunc("UNIX_DATE", sig(tI, goCall("spf_unix_date"), tD))
	defStrict("spf_unix_date", 1, func(a []driver.Value) (driver.Value, error) {
		d, err := asDate(a[0])
		if err != nil {
			return nil, err
		}
		return int64(math.Floor(float64(d.Unix()) / 86400)), nil
	})
	defFunc("DATE_FROM_UNIX_DATE", sig(tD, goCall("spf_date_from_unix_date"), tI))
	defStrict("spf_date_from_unix_date", 1, func(a []driver.Value) (driver.Value, error) {
		n, err := asInt(a[0])
		if err != nil {
			return nil, err
		}
		if n > 3_000_000 || n < -800_000 {
			return nil, outOfRange("DATE_FROM_UNIX_DATE out of range: %d", n)
		}
		return storeDate(time.Unix(n*86400, 0).UTC())
	})

	defStrict("spf_timestamp_to_string", -1, func(a []driver.Value) (driver.Value, error) {
		t, loc, err := timeAndZone(a)
		if err != nil {
			return nil, err
		}
		return formatTimestampString(t, loc), nil
	})
	defFunc("FORMAT_TIMESTAMP", sig(tS, goCall("spf_format_timestamp"), tS, tT, tS).opt(1))
	defStrict("spf_format_timestamp", -1, func(a []driver.Value) (driver.Value, error) {
		t, loc, err := timeAndZone(a[1:])
		if err != nil {
			return nil, err
		}
		return formatTime(asString(a[0]), t.In(loc))
	})
	defFunc("FORMAT_DATE", sig(tS, goCall("spf_format_date"), tS, tD))
	defStrict("spf_format_date", 2, func(a []driver.Value) (driver.Value, error) {
		d, err := asDate(a[1])
		if err != nil {
			return nil, err
		}
		return formatTime(asString(a[0]), d)
	})
	defFunc("PARSE_TIMESTAMP", sig(tT, goCall("spf_parse_timestamp"), tS, tS, tS).opt(1))
	defStrict("spf_parse_timestamp", -1, func(a []driver.Value) (driver.Value, error) {
		loc := spantype.DefaultTimeZone
		if len(a) > 2 {
			var err error
			if loc, err = zoneValue(a[2]); err != nil {
				return nil, err
			}
		}
		t, err := parseTime(asString(a[0]), asString(a[1]), loc)
		if err != nil {
			return nil, err
		}
		return storeTime(t)
	})
	defFunc("PARSE_DATE", sig(tD, goCall("spf_parse_date"), tS, tS))
	defStrict("spf_parse_date", 2, func(a []driver.Value) (driver.Value, error) {
		t, err := parseTime(asString(a[0]), asString(a[1]), time.UTC)
		if err != nil {
			return nil, err
		}
		return storeDate(t)
	})

	// spf_extract(x, part, kind, zone): kind is 'DATE' or 'TIMESTAMP'; zone only matters for
	// TIMESTAMP.
	defLax("spf_extract", 4, func(a []driver.Value) (driver.Value, error) {
		if a[0] == nil || (asString(a[2]) == "TIMESTAMP" && a[3] == nil) {
			return nil, nil
		}
		var t time.Time
		var err error
		if asString(a[2]) == "DATE" {
			t, err = asDate(a[0])
		} else {
			var loc *time.Location
			if t, loc, err = timeAndZone([]driver.Value{a[0], a[3]}); err == nil {
				t = t.In(loc)
			}
		}
		if err != nil {
			return nil, err
		}
		return extractPart(t, asString(a[1]))
	})
}

func timeAndZone(a []driver.Value) (time.Time, *time.Location, error) {
	t, err := asTime(a[0])
	if err != nil {
		return t, nil, err
	}
	var z driver.Value
	if len(a) > 1 {
		z = a[1]
	}
	loc, err := zoneValue(z)
	return t, loc, err
}

func unixNanos(t time.Time) *big.Int {
	n := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(1e9))
	return n.Add(n, big.NewInt(int64(t.Nanosecond())))
}

func storeDate(d time.Time) (driver.Value, error) {
	if d.Year() < 1 || d.Year() > 9999 {
		return nil, outOfRange("Date overflow")
	}
	return spantype.FormatDate(d), nil
}

// addDate adds n parts to d; month arithmetic clamps to the end of the month (Jan 31 + 1 MONTH
// is Feb 28/29), as GoogleSQL does.
func addDate(d time.Time, n int, part string) time.Time {
	switch part {
	case "DAY":
		return d.AddDate(0, 0, n)
	case "WEEK":
		return d.AddDate(0, 0, 7*n)
	}
	months := n
	switch part {
	case "QUARTER":
		months = 3 * n
	case "YEAR":
		months = 12 * n
	}
	first := time.Date(d.Year(), d.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, months, 0)
	last := first.AddDate(0, 1, -1).Day()
	return time.Date(first.Year(), first.Month(), min(d.Day(), last), 0, 0, 0, 0, time.UTC)
}

func daysSinceEpoch(d time.Time) int64 {
	return int64(math.Floor(float64(time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC).Unix()) / 86400))
}

func dateDiff(x, y time.Time, part string) int64 {
	switch part {
	case "DAY":
		return daysSinceEpoch(x) - daysSinceEpoch(y)
	case "WEEK", "ISOWEEK":
		return (daysSinceEpoch(truncDate(x, part)) - daysSinceEpoch(truncDate(y, part))) / 7
	case "MONTH":
		return int64(x.Year()*12+int(x.Month())) - int64(y.Year()*12+int(y.Month()))
	case "QUARTER":
		return int64(x.Year()*4+(int(x.Month())-1)/3) - int64(y.Year()*4+(int(y.Month())-1)/3)
	case "YEAR":
		return int64(x.Year() - y.Year())
	case "ISOYEAR":
		xy, _ := x.ISOWeek()
		yy, _ := y.ISOWeek()
		return int64(xy - yy)
	}
	return 0
}

// truncDate truncates a date (in UTC) to the start of part.
func truncDate(d time.Time, part string) time.Time {
	switch part {
	case "WEEK":
		return d.AddDate(0, 0, -int(d.Weekday()))
	case "ISOWEEK":
		return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	case "MONTH":
		return time.Date(d.Year(), d.Month(), 1, 0, 0, 0, 0, time.UTC)
	case "QUARTER":
		return time.Date(d.Year(), d.Month()-(d.Month()-1)%3, 1, 0, 0, 0, 0, time.UTC)
	case "YEAR":
		return time.Date(d.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	case "ISOYEAR":
		y, _ := d.ISOWeek()
		jan4 := time.Date(y, 1, 4, 0, 0, 0, 0, time.UTC)
		return truncDate(jan4, "ISOWEEK")
	}
	return d
}

// sundayWeek is GoogleSQL's WEEK: weeks start on Sunday; days before the year's first Sunday
// are in week 0.
func sundayWeek(t time.Time) int64 {
	return int64((t.YearDay() - 1 - int(t.Weekday()) + 7) / 7)
}

var extractParts = map[string]bool{
	"NANOSECOND": true, "MICROSECOND": true, "MILLISECOND": true, "SECOND": true, "MINUTE": true, "HOUR": true,
	"DAYOFWEEK": true, "DAY": true, "DAYOFYEAR": true, "WEEK": true, "ISOWEEK": true, "MONTH": true,
	"QUARTER": true, "YEAR": true, "ISOYEAR": true, "DATE": true,
}

func extractPart(t time.Time, part string) (driver.Value, error) {
	switch part {
	case "NANOSECOND":
		return int64(t.Second())*1e9 + int64(t.Nanosecond()), nil
	case "MICROSECOND":
		return int64(t.Second())*1e6 + int64(t.Nanosecond()/1e3), nil
	case "MILLISECOND":
		return int64(t.Second())*1e3 + int64(t.Nanosecond()/1e6), nil
	case "SECOND":
		return int64(t.Second()), nil
	case "MINUTE":
		return int64(t.Minute()), nil
	case "HOUR":
		return int64(t.Hour()), nil
	case "DAYOFWEEK":
		return int64(t.Weekday()) + 1, nil
	case "DAY":
		return int64(t.Day()), nil
	case "DAYOFYEAR":
		return int64(t.YearDay()), nil
	case "WEEK":
		return sundayWeek(t), nil
	case "ISOWEEK":
		_, w := t.ISOWeek()
		return int64(w), nil
	case "MONTH":
		return int64(t.Month()), nil
	case "QUARTER":
		return int64((t.Month()-1)/3 + 1), nil
	case "YEAR":
		return int64(t.Year()), nil
	case "ISOYEAR":
		y, _ := t.ISOWeek()
		return int64(y), nil
	case "DATE":
		return spantype.FormatDate(t), nil
	}
	return nil, internalErr("unsupported date part %s", part)
}

// Extract translates EXTRACT(part FROM x [AT TIME ZONE tz]); tz may be nil.
func Extract(part string, x Arg, tz *Arg) (Arg, error) {
	part = strings.ToUpper(part)
	if !extractParts[part] {
		return Arg{}, errorf("Unsupported date part in EXTRACT: %s", part)
	}
	switch x.Type.Code {
	case spantype.Timestamp, spantype.Unknown:
	case spantype.Date:
		if _, isTime := partNanos[part]; (isTime && part != "DAY") || part == "DATE" || tz != nil {
			return Arg{}, errorf("EXTRACT from DATE does not support the %s date part", part)
		}
	case spantype.String:
		if x.StringLiteral == nil {
			return Arg{}, errorf("EXTRACT does not support arguments of type STRING")
		}
		c, err := Coerce(x, tT)
		if err != nil {
			return Arg{}, err
		}
		x = c
	default:
		return Arg{}, errorf("EXTRACT does not support arguments of type %s", x.Type)
	}
	kind, zone := "DATE", "NULL"
	if x.Type.Code == spantype.Timestamp || x.Type.Code == spantype.Unknown {
		kind, zone = "TIMESTAMP", sqlString(spantype.DefaultTimeZone.String())
	}
	if tz != nil {
		if tz.Type.Code != spantype.String && tz.Type.Code != spantype.Unknown {
			return Arg{}, errorf("AT TIME ZONE requires a STRING time zone")
		}
		zone = tz.SQL
	}
	t := tI
	if part == "DATE" {
		t = tD
	}
	return Arg{SQL: sqlCall("spf_extract", x.SQL, sqlString(part), sqlString(kind), zone), Type: t}, nil
}

// formatTime renders t with GoogleSQL's strftime-like format elements.
func formatTime(format string, t time.Time) (driver.Value, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		c = format[i]
		if c == 'E' && i+1 < len(format) {
			// %Ez, %E#S, %E*S, %E4Y
			rest := format[i+1:]
			switch {
			case strings.HasPrefix(rest, "z"):
				b.WriteString(t.Format("-07:00"))
				i++
			case strings.HasPrefix(rest, "*S"):
				b.WriteString(fmt.Sprintf("%02d", t.Second()))
				if ns := t.Nanosecond(); ns != 0 {
					b.WriteString(strings.TrimRight(fmt.Sprintf(".%09d", ns), "0"))
				}
				i += 2
			case strings.HasPrefix(rest, "4Y"):
				b.WriteString(fmt.Sprintf("%04d", t.Year()))
				i += 2
			case len(rest) >= 2 && rest[0] >= '0' && rest[0] <= '9' && rest[1] == 'S':
				digits := int(rest[0] - '0')
				b.WriteString(fmt.Sprintf("%02d", t.Second()))
				if digits > 0 {
					b.WriteString(fmt.Sprintf(".%09d", t.Nanosecond())[:digits+1])
				}
				i += 2
			default:
				b.WriteString("%E")
			}
			continue
		}
		switch c {
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'y':
			b.WriteString(fmt.Sprintf("%02d", t.Year()%100))
		case 'C':
			b.WriteString(fmt.Sprintf("%02d", t.Year()/100))
		case 'm':
			b.WriteString(fmt.Sprintf("%02d", int(t.Month())))
		case 'd':
			b.WriteString(fmt.Sprintf("%02d", t.Day()))
		case 'e':
			b.WriteString(fmt.Sprintf("%2d", t.Day()))
		case 'H':
			b.WriteString(fmt.Sprintf("%02d", t.Hour()))
		case 'k':
			b.WriteString(fmt.Sprintf("%2d", t.Hour()))
		case 'I':
			b.WriteString(fmt.Sprintf("%02d", (t.Hour()+11)%12+1))
		case 'l':
			b.WriteString(fmt.Sprintf("%2d", (t.Hour()+11)%12+1))
		case 'M':
			b.WriteString(fmt.Sprintf("%02d", t.Minute()))
		case 'S':
			b.WriteString(fmt.Sprintf("%02d", t.Second()))
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'P':
			b.WriteString(strings.ToLower(t.Format("PM")))
		case 'j':
			b.WriteString(fmt.Sprintf("%03d", t.YearDay()))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'R':
			b.WriteString(t.Format("15:04"))
		case 'D', 'x':
			b.WriteString(t.Format("01/02/06"))
		case 'X':
			b.WriteString(t.Format("15:04:05"))
		case 'c':
			b.WriteString(fmt.Sprintf("%s %s %2d %s %d", t.Format("Mon"), t.Format("Jan"), t.Day(), t.Format("15:04:05"), t.Year()))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case 's':
			b.WriteString(strconv.FormatInt(t.Unix(), 10))
		case 'u':
			b.WriteString(strconv.Itoa((int(t.Weekday())+6)%7 + 1))
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'U':
			b.WriteString(fmt.Sprintf("%02d", sundayWeek(t)))
		case 'W':
			b.WriteString(fmt.Sprintf("%02d", (t.YearDay()-1-(int(t.Weekday())+6)%7+7)/7))
		case 'V':
			_, w := t.ISOWeek()
			b.WriteString(fmt.Sprintf("%02d", w))
		case 'G':
			y, _ := t.ISOWeek()
			b.WriteString(strconv.Itoa(y))
		case 'g':
			y, _ := t.ISOWeek()
			b.WriteString(fmt.Sprintf("%02d", y%100))
		case 'Q':
			b.WriteString(strconv.Itoa((int(t.Month())-1)/3 + 1))
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// parseTime parses s against a format made of the common elements (%Y %m %d %H %M %S %E*S %Ez
// %z %F %T %y %j %b %B %a %A %p %I %e %s %Z %%). Missing fields default to 1970-01-01 00:00:00.
func parseTime(format, s string, loc *time.Location) (time.Time, error) {
	bad := func() (time.Time, error) {
		return time.Time{}, outOfRange("Failed to parse input string %q with format %q", s, format)
	}
	year, month, day, hour, minute, sec, nanos := 1970, 1, 1, 0, 0, 0, 0
	pm, hasPM, hour12 := false, false, false
	var epoch *int64
	pos := 0
	num := func(maxDigits int) (int, bool) {
		start := pos
		if pos < len(s) && (s[pos] == '-' || s[pos] == '+') && maxDigits > 4 {
			pos++
		}
		for pos < len(s) && pos-start < maxDigits && s[pos] >= '0' && s[pos] <= '9' {
			pos++
		}
		n, err := strconv.Atoi(s[start:pos])
		return n, err == nil
	}
	word := func(names []string) (int, bool) {
		for i, n := range names {
			if len(s)-pos >= len(n) && strings.EqualFold(s[pos:pos+len(n)], n) {
				pos += len(n)
				return i, true
			}
		}
		return 0, false
	}
	months := []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
	shortMonths := []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
	days := []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	format = compositeFormats.Replace(format)
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c == ' ' {
			for pos < len(s) && s[pos] == ' ' {
				pos++
			}
			continue
		}
		if c != '%' || i+1 == len(format) {
			if pos >= len(s) || s[pos] != c {
				return bad()
			}
			pos++
			continue
		}
		i++
		c = format[i]
		var ok bool
		switch c {
		case 'Y':
			year, ok = num(4)
		case 'y':
			var y int
			if y, ok = num(2); ok {
				year = 1900 + y
				if y < 69 {
					year = 2000 + y
				}
			}
		case 'm':
			month, ok = num(2)
		case 'd', 'e':
			for pos < len(s) && s[pos] == ' ' {
				pos++
			}
			day, ok = num(2)
		case 'j':
			var yd int
			if yd, ok = num(3); ok {
				month, day = 1, yd
			}
		case 'H', 'k':
			hour, ok = num(2)
		case 'I', 'l':
			hour, ok = num(2)
			hour12 = true
		case 'M':
			minute, ok = num(2)
		case 'S':
			sec, ok = num(2)
		case 'p', 'P':
			var i int
			if i, ok = word([]string{"AM", "PM"}); ok {
				pm, hasPM = i == 1, true
			}
		case 'b', 'h', 'B':
			var m int
			if m, ok = word(months); !ok {
				m, ok = word(shortMonths)
			}
			month = m + 1
		case 'a', 'A':
			_, ok = word(days)
		case 's':
			var n int
			if n, ok = num(20); ok {
				e := int64(n)
				epoch = &e
			}
		case 'z':
			ok = parseOffsetAt(s, &pos, &loc)
		case 'Z':
			start := pos
			for pos < len(s) && s[pos] != ' ' {
				pos++
			}
			z, err := parseZone(s[start:pos])
			ok = err == nil
			if ok {
				loc = z
			}
		case 'E':
			rest := format[i+1:]
			switch {
			case strings.HasPrefix(rest, "z"):
				i++
				ok = parseOffsetAt(s, &pos, &loc)
			case strings.HasPrefix(rest, "*S") || (len(rest) >= 2 && rest[1] == 'S'):
				i += 2
				if sec, ok = num(2); ok && pos < len(s) && s[pos] == '.' {
					pos++
					start := pos
					for pos < len(s) && pos-start < 9 && s[pos] >= '0' && s[pos] <= '9' {
						pos++
					}
					f := s[start:pos]
					n, _ := strconv.Atoi(f)
					nanos = n * int(math.Pow10(9-len(f)))
				}
			case strings.HasPrefix(rest, "4Y"):
				i += 2
				year, ok = num(4)
			}
		case '%':
			ok = pos < len(s) && s[pos] == '%'
			pos++
		case 'n', 't':
			for pos < len(s) && (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\t') {
				pos++
			}
			ok = true
		}
		if !ok {
			return bad()
		}
	}
	for pos < len(s) && s[pos] == ' ' {
		pos++
	}
	if pos != len(s) {
		return bad()
	}
	if epoch != nil {
		return time.Unix(*epoch, 0).UTC(), nil
	}
	if hour12 {
		if hour < 1 || hour > 12 {
			return bad()
		}
		hour %= 12
	}
	if hasPM && pm {
		hour += 12
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nanos, loc)
	if month < 1 || month > 12 || (day > 31 && month != 1) || hour > 23 || minute > 59 || sec > 59 {
		return bad()
	}
	if t.Day() != day && day <= 31 {
		return bad()
	}
	return t.UTC(), nil
}

// compositeFormats expands the format elements that stand for several others.
var compositeFormats = strings.NewReplacer("%F", "%Y-%m-%d", "%T", "%H:%M:%S", "%D", "%m/%d/%y", "%R", "%H:%M")

func parseOffsetAt(s string, pos *int, loc **time.Location) bool {
	start := *pos
	if *pos < len(s) && (s[*pos] == 'Z' || s[*pos] == 'z') {
		*pos++
		*loc = time.UTC
		return true
	}
	if *pos >= len(s) || (s[*pos] != '+' && s[*pos] != '-') {
		return false
	}
	*pos++
	for *pos < len(s) && (s[*pos] == ':' || (s[*pos] >= '0' && s[*pos] <= '9')) {
		*pos++
	}
	z, err := parseZone(s[start:*pos])
	if err != nil {
		return false
	}
	*loc = z
	return true
}
