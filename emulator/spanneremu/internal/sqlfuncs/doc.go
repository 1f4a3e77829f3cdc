package sqlfuncs

// What this library supports, and what it does not (yet).
//
// Operators (Binary, Unary): + - * with INT64 overflow errors, / always FLOAT64 (or NUMERIC) with a
// division-by-zero error, comparisons for every orderable type (INT64/FLOAT64 mixing, NUMERIC
// compared numerically, IEEE rules for NaN, STRING literals coerced to DATE, TIMESTAMP, NUMERIC or
// JSON), STRUCT = and != field by field with three-valued logic, IS [NOT] DISTINCT FROM,
// AND/OR/NOT, case-sensitive LIKE with % _ and \ escapes for STRING and BYTES, || for STRING, BYTES
// and ARRAY, & | ^ ~ << >> for INT64 and BYTES.
//
// CAST/SAFE_CAST between BOOL, INT64, FLOAT64, FLOAT32, NUMERIC, STRING, BYTES, DATE and TIMESTAMP
// as GoogleSQL allows, element-wise for ARRAY and STRUCT. STRING literals are cast at translation
// time so a bad literal fails before the statement runs. Zone-less strings and
// TIMESTAMP→STRING/DATE use Spanner's default zone, America/Los_Angeles.
//
// Scalar functions: CONCAT, LENGTH, CHAR_LENGTH, CHARACTER_LENGTH, BYTE_LENGTH, UPPER, LOWER,
// SUBSTR, SUBSTRING, STRPOS, INSTR, STARTS_WITH, ENDS_WITH, REPLACE, TRIM, LTRIM, RTRIM, LPAD,
// RPAD, REPEAT, REVERSE, SPLIT, REGEXP_CONTAINS, REGEXP_EXTRACT, REGEXP_SUBSTR, REGEXP_EXTRACT_ALL,
// REGEXP_REPLACE, FORMAT, TO_BASE32, FROM_BASE32, TO_BASE64, FROM_BASE64, TO_HEX, FROM_HEX,
// SAFE_CONVERT_BYTES_TO_STRING, TO_CODE_POINTS, CODE_POINTS_TO_STRING, CODE_POINTS_TO_BYTES, ASCII,
// CHR, SOUNDEX, NORMALIZE, NORMALIZE_AND_CASEFOLD; ABS, SIGN, ROUND, TRUNC, CEIL, CEILING, FLOOR,
// SQRT, POW, POWER, EXP, LN, LOG, LOG10, SIN, COS, TAN, ASIN, ACOS, ATAN, ATAN2, GREATEST, LEAST,
// IEEE_DIVIDE, SAFE_DIVIDE, SAFE_ADD, SAFE_SUBTRACT, SAFE_MULTIPLY, SAFE_NEGATE, IS_NAN, IS_INF,
// MOD, DIV; IF, IFNULL, COALESCE, NULLIF; CURRENT_TIMESTAMP, CURRENT_DATE, TIMESTAMP, DATE,
// TIMESTAMP_ADD/SUB/DIFF/ TRUNC, DATE_ADD/SUB/DIFF/TRUNC, EXTRACT, FORMAT_TIMESTAMP, FORMAT_DATE,
// PARSE_TIMESTAMP, PARSE_DATE, UNIX_SECONDS/MILLIS/MICROS/NANOS,
// TIMESTAMP_SECONDS/MILLIS/MICROS/NANOS, UNIX_DATE, DATE_FROM_UNIX_DATE; JSON_VALUE, JSON_QUERY,
// JSON_VALUE_ARRAY, JSON_QUERY_ARRAY, PARSE_JSON, TO_JSON, TO_JSON_STRING, JSON_TYPE, JSON_KEYS,
// JSON_OBJECT, JSON_ARRAY, BOOL, INT64, FLOAT64, STRING (of JSON); ARRAY_LENGTH, ARRAY_CONCAT,
// ARRAY_TO_STRING, ARRAY_REVERSE, ARRAY_INCLUDES, ARRAY_INCLUDES_ANY, ARRAY_INCLUDES_ALL,
// ARRAY_MIN, ARRAY_MAX, ARRAY_IS_DISTINCT, ARRAY_FIRST, ARRAY_LAST, ARRAY_SLICE, GENERATE_ARRAY,
// GENERATE_DATE_ARRAY, plus ArrayElement and StructField for subscripts and field access; LAX_BOOL,
// LAX_INT64, LAX_FLOAT64, LAX_STRING, STRING(timestamp[, zone]); GENERATE_UUID, FARM_FINGERPRINT,
// SHA1, SHA256, SHA512, BIT_COUNT, BIT_REVERSE, ERROR. Any function may be called as SAFE.F(...).
//
// Aggregates: COUNT(*), COUNT, COUNTIF, SUM, AVG, MIN, MAX, ARRAY_AGG (RESPECT/IGNORE NULLS),
// ARRAY_CONCAT_AGG, STRING_AGG, LOGICAL_AND, LOGICAL_OR, ANY_VALUE, BIT_AND, BIT_OR, BIT_XOR,
// STDDEV, STDDEV_SAMP, VARIANCE, VAR_SAMP, APPROX_COUNT_DISTINCT (exact), each with DISTINCT,
// HAVING MAX/HAVING MIN (Call.Having), ORDER BY (Call.OrderBy) and LIMIT (Call.Limit).
//
// Errors raised while a statement runs (overflow, bad casts, division by zero, ERROR()) carry
// OUT_OF_RANGE, as Spanner reports them; ParseRuntimeError extracts code and message from a SQLite
// error.
//
// Known gaps:
//   - CURRENT_TIMESTAMP() rendered here is evaluated per call (SQLite gives a Go function no
//     statement context); the translator substitutes a statement-constant literal instead.
//   - BIT_REVERSE(x, TRUE) of a negative x keeps the sign bit and reverses the 63 others (two's
//     complement); not checked against Spanner.
//   - The default time zone is fixed to America/Los_Angeles (no ALTER DATABASE default_time_zone).
//   - UPPER/LOWER use Go's simple case mapping (ß stays ß).
//   - FORMAT supports the common verbs and flags; %'d grouping is ignored.
//   - PARSE_TIMESTAMP/PARSE_DATE support the common elements (%Y %m %d %H %M %S %E*S %Ez %z %F %T
//     %y %j %b %B %a %A %p %I %e %s %Z), not all of them.
//   - NUMERIC overloads of SQRT, POW, EXP, LN, LOG, LOG10 compute in FLOAT64 and round.
//   - Window functions are not supported (Spanner has none either).
//   - JSON number precision options (wide_number_mode, stringify_wide_numbers) are ignored.
