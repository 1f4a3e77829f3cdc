package sqlfuncs

import (
	"testing"
	"time"
)

func extract(part string, x Arg, tz *Arg) func() (Arg, error) {
	return func() (Arg, error) { return Extract(part, x, tz) }
}

func TestTimeFunctions(t *testing.T) {
	ts := p(1, tT)
	d := p(1, tD)
	const t0 = "2020-03-15T12:34:56.789123456Z" // a Sunday; 05:34:56 in Los Angeles (PDT)
	utc := lit("UTC")
	runEvalCases(t, []evalCase{
		{name: "timestamp from string", expr: fn("TIMESTAMP", lit("2020-01-01 00:00:00")), want: "2020-01-01T08:00:00.000000000Z", wantType: tT},
		{name: "timestamp from string tz", expr: fn("TIMESTAMP", lit("2020-01-01 00:00:00"), lit("Asia/Tokyo")), want: "2019-12-31T15:00:00.000000000Z"},
		{name: "timestamp from date", expr: fn("TIMESTAMP", d, utc), params: []any{"2020-01-01"}, want: "2020-01-01T00:00:00.000000000Z"},
		{name: "date ymd", expr: fn("DATE", intLit(2020), intLit(2), intLit(29)), want: "2020-02-29"},
		{name: "date ymd invalid", expr: fn("DATE", intLit(2021), intLit(2), intLit(29)), wantCode: "OUT_OF_RANGE"},
		{name: "date from timestamp", expr: fn("DATE", ts), params: []any{"2020-01-01T05:00:00.000000000Z"}, want: "2019-12-31"},
		{name: "date from timestamp utc", expr: fn("DATE", ts, utc), params: []any{"2020-01-01T05:00:00.000000000Z"}, want: "2020-01-01"},
		{name: "timestamp_add", expr: fn("TIMESTAMP_ADD", ts, intLit(90), lit("MINUTE")), params: []any{t0}, want: "2020-03-15T14:04:56.789123456Z"},
		{name: "timestamp_add nanos", expr: fn("TIMESTAMP_ADD", ts, intLit(1), lit("NANOSECOND")), params: []any{t0}, want: "2020-03-15T12:34:56.789123457Z"},
		{name: "timestamp_sub day", expr: fn("TIMESTAMP_SUB", ts, intLit(1), lit("DAY")), params: []any{t0}, want: "2020-03-14T12:34:56.789123456Z"},
		{name: "timestamp_add overflow", expr: fn("TIMESTAMP_ADD", ts, intLit(1000000), lit("DAY")), params: []any{"9999-01-01T00:00:00.000000000Z"}, wantCode: "OUT_OF_RANGE"},
		{name: "timestamp_diff", expr: fn("TIMESTAMP_DIFF", ts, lit("2020-03-15 12:00:00+00"), lit("MINUTE")), params: []any{t0}, want: int64(34)},
		{name: "timestamp_diff negative truncates", expr: fn("TIMESTAMP_DIFF", lit("2020-01-01 00:00:00+00"), lit("2020-01-01 00:01:30+00"), lit("MINUTE")), want: int64(-1)},
		{name: "timestamp_trunc hour", expr: fn("TIMESTAMP_TRUNC", ts, lit("HOUR")), params: []any{t0}, want: "2020-03-15T12:00:00.000000000Z"},
		{name: "timestamp_trunc day default zone", expr: fn("TIMESTAMP_TRUNC", ts, lit("DAY")), params: []any{t0}, want: "2020-03-15T07:00:00.000000000Z"},
		{name: "timestamp_trunc day utc", expr: fn("TIMESTAMP_TRUNC", ts, lit("DAY"), utc), params: []any{t0}, want: "2020-03-15T00:00:00.000000000Z"},
		{name: "timestamp_trunc month utc", expr: fn("TIMESTAMP_TRUNC", ts, lit("MONTH"), utc), params: []any{t0}, want: "2020-03-01T00:00:00.000000000Z"},
		{name: "timestamp_trunc millis", expr: fn("TIMESTAMP_TRUNC", ts, lit("MILLISECOND")), params: []any{t0}, want: "2020-03-15T12:34:56.789000000Z"},
		{name: "date_add month clamps", expr: fn("DATE_ADD", d, intLit(1), lit("MONTH")), params: []any{"2020-01-31"}, want: "2020-02-29"},
		{name: "date_sub year", expr: fn("DATE_SUB", d, intLit(1), lit("YEAR")), params: []any{"2020-02-29"}, want: "2019-02-28"},
		{name: "date_add week", expr: fn("DATE_ADD", d, intLit(2), lit("WEEK")), params: []any{"2020-01-01"}, want: "2020-01-15"},
		{name: "date_diff day", expr: fn("DATE_DIFF", lit("2020-03-01"), d, lit("DAY")), params: []any{"2020-02-01"}, want: int64(29)},
		{name: "date_diff month", expr: fn("DATE_DIFF", lit("2020-03-01"), d, lit("MONTH")), params: []any{"2019-12-31"}, want: int64(3)},
		{name: "date_diff week", expr: fn("DATE_DIFF", lit("2020-03-15"), d, lit("WEEK")), params: []any{"2020-03-14"}, want: int64(1)},
		{name: "date_trunc quarter", expr: fn("DATE_TRUNC", d, lit("QUARTER")), params: []any{"2020-05-17"}, want: "2020-04-01"},
		{name: "date_trunc week", expr: fn("DATE_TRUNC", d, lit("WEEK")), params: []any{"2020-03-18"}, want: "2020-03-15"},
		{name: "date_trunc isoweek", expr: fn("DATE_TRUNC", d, lit("ISOWEEK")), params: []any{"2020-03-15"}, want: "2020-03-09"},
		{name: "unix_seconds", expr: fn("UNIX_SECONDS", ts), params: []any{"1970-01-01T00:00:01.500000000Z"}, want: int64(1)},
		{name: "unix_seconds floor", expr: fn("UNIX_SECONDS", ts), params: []any{"1969-12-31T23:59:59.500000000Z"}, want: int64(-1)},
		{name: "unix_millis", expr: fn("UNIX_MILLIS", ts), params: []any{"1970-01-01T00:00:01.500000000Z"}, want: int64(1500)},
		{name: "unix_micros", expr: fn("UNIX_MICROS", ts), params: []any{"1970-01-01T00:00:00.000001000Z"}, want: int64(1)},
		{name: "timestamp_seconds", expr: fn("TIMESTAMP_SECONDS", intLit(86400)), want: "1970-01-02T00:00:00.000000000Z"},
		{name: "timestamp_millis", expr: fn("TIMESTAMP_MILLIS", intLit(-1)), want: "1969-12-31T23:59:59.999000000Z"},
		{name: "timestamp_micros", expr: fn("TIMESTAMP_MICROS", intLit(1)), want: "1970-01-01T00:00:00.000001000Z"},
		{name: "unix_date", expr: fn("UNIX_DATE", d), params: []any{"1970-01-10"}, want: int64(9)},
		{name: "date_from_unix_date", expr: fn("DATE_FROM_UNIX_DATE", intLit(-1)), want: "1969-12-31"},
		{name: "format_timestamp", expr: fn("FORMAT_TIMESTAMP", lit("%Y-%m-%d %H:%M:%S"), ts, utc), params: []any{t0}, want: "2020-03-15 12:34:56"},
		{name: "format_timestamp default zone", expr: fn("FORMAT_TIMESTAMP", lit("%F %T %Ez"), ts), params: []any{t0}, want: "2020-03-15 05:34:56 -07:00"},
		{name: "format_timestamp fraction", expr: fn("FORMAT_TIMESTAMP", lit("%E3S|%E*S"), ts, utc), params: []any{t0}, want: "56.789|56.789123456"},
		{name: "format_date", expr: fn("FORMAT_DATE", lit("%A %b %e %Y %j"), d), params: []any{"2020-03-05"}, want: "Thursday Mar  5 2020 065"},
		{name: "parse_timestamp", expr: fn("PARSE_TIMESTAMP", lit("%Y-%m-%d %H:%M:%S"), lit("2020-03-15 12:34:56"), utc), want: "2020-03-15T12:34:56.000000000Z"},
		{name: "parse_timestamp default zone", expr: fn("PARSE_TIMESTAMP", lit("%F %T"), lit("2020-01-15 12:00:00")), want: "2020-01-15T20:00:00.000000000Z"},
		{name: "parse_timestamp offset", expr: fn("PARSE_TIMESTAMP", lit("%Y%m%d %H%M%E*S%Ez"), lit("20200315 123456.25+01:00")), want: "2020-03-15T11:34:56.250000000Z"},
		{name: "parse_timestamp bad", expr: fn("PARSE_TIMESTAMP", lit("%Y-%m-%d"), lit("2020/03/15")), wantCode: "OUT_OF_RANGE"},
		{name: "parse_date", expr: fn("PARSE_DATE", lit("%d/%m/%Y"), lit("15/03/2020")), want: "2020-03-15"},
		{name: "parse_date month name", expr: fn("PARSE_DATE", lit("%b %d %Y"), lit("Dec 25 2008")), want: "2008-12-25"},
		{name: "extract year", expr: extract("YEAR", ts, nil), params: []any{"2020-01-01T05:00:00.000000000Z"}, want: int64(2019)},
		{name: "extract hour utc", expr: extract("HOUR", ts, &utc), params: []any{t0}, want: int64(12)},
		{name: "extract dayofweek", expr: extract("DAYOFWEEK", d, nil), params: []any{"2020-03-15"}, want: int64(1)},
		{name: "extract week", expr: extract("WEEK", d, nil), params: []any{"2020-03-15"}, want: int64(11)},
		{name: "extract isoweek", expr: extract("ISOWEEK", d, nil), params: []any{"2020-03-15"}, want: int64(11)},
		{name: "extract dayofyear", expr: extract("DAYOFYEAR", d, nil), params: []any{"2020-03-15"}, want: int64(75)},
		{name: "extract quarter", expr: extract("QUARTER", d, nil), params: []any{"2020-03-15"}, want: int64(1)},
		{name: "extract millisecond", expr: extract("MILLISECOND", ts, nil), params: []any{t0}, want: int64(56789)},
		{name: "extract date", expr: extract("DATE", ts, &utc), params: []any{t0}, want: "2020-03-15", wantType: tD},
		{name: "extract null", expr: extract("YEAR", ts, nil), params: []any{nil}, want: nil},
	})
}

func TestCurrentTime(t *testing.T) {
	before := time.Now().UTC().Add(-time.Second).Format("2006-01-02T15:04:05")
	x, err := Function(Call{Name: "CURRENT_TIMESTAMP"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Eval(t, x)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := got.(string)
	if len(s) != 30 || s < before {
		t.Errorf("CURRENT_TIMESTAMP() = %q, want a storage timestamp after %s", s, before)
	}
	x, err = Function(Call{Name: "CURRENT_DATE", Args: []Arg{lit("UTC")}})
	if err != nil {
		t.Fatal(err)
	}
	got, err = Eval(t, x)
	if err != nil || len(got.(string)) != 10 {
		t.Errorf("CURRENT_DATE('UTC') = %v, %v", got, err)
	}
}

func TestExtractErrors(t *testing.T) {
	for _, c := range []struct {
		part string
		x    Arg
	}{
		{"HOUR", p(1, tD)},
		{"YEAR", p(1, tI)},
		{"FORTNIGHT", p(1, tT)},
	} {
		if _, err := Extract(c.part, c.x, nil); err == nil {
			t.Errorf("EXTRACT(%s FROM %s): want an error", c.part, c.x.Type)
		}
	}
}
