package conformance

import (
	"math"
	"regexp"
	"testing"

	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
)

var querySchema = []string{
	`CREATE TABLE Singers (SingerId INT64 NOT NULL, FirstName STRING(MAX), LastName STRING(MAX), Age INT64) PRIMARY KEY (SingerId)`,
	`CREATE TABLE Albums (SingerId INT64 NOT NULL, AlbumId INT64 NOT NULL, Title STRING(MAX), Sales INT64) PRIMARY KEY (SingerId, AlbumId),
		INTERLEAVE IN PARENT Singers ON DELETE CASCADE`,
	`CREATE INDEX AlbumsByTitle ON Albums(Title)`,
}

func seedQueries(t *testing.T, client *spanner.Client) {
	t.Helper()
	sc := []string{"SingerId", "FirstName", "LastName", "Age"}
	ac := []string{"SingerId", "AlbumId", "Title", "Sales"}
	mustApply(t, client,
		spanner.Insert("Singers", sc, []any{1, "Marc", "Richards", 30}),
		spanner.Insert("Singers", sc, []any{2, "Catalina", "Smith", 25}),
		spanner.Insert("Singers", sc, []any{3, "Alice", "Trentor", nil}),
		spanner.Insert("Singers", sc, []any{4, "Lea", "Martin", 25}),
		spanner.Insert("Albums", ac, []any{1, 1, "Total Junk", 100}),
		spanner.Insert("Albums", ac, []any{1, 2, "Go Go Go", 200}),
		spanner.Insert("Albums", ac, []any{2, 1, "Green", 300}),
		spanner.Insert("Albums", ac, []any{2, 2, "Forever Hold", nil}),
		spanner.Insert("Albums", ac, []any{2, 3, "Terrified", 50}),
	)
}

type queryCase struct {
	name      string
	sql       string
	params    map[string]any
	wantTypes []string // nil: not checked
	want      [][]any
}

func runQueryCases(t *testing.T, client *spanner.Client, tests []queryCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := query(t, client.Single(), spanner.Statement{SQL: tt.sql, Params: tt.params})
			if tt.wantTypes != nil {
				if diff := cmp.Diff(tt.wantTypes, res.Types); diff != "" {
					t.Errorf("types (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tt.want, res.Rows, cmpOpts...); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueries(t *testing.T) {
	t.Parallel()
	client := newDB(t, querySchema...)
	seedQueries(t, client)

	t.Run("Joins", func(t *testing.T) {
		t.Parallel()
		runQueryCases(t, client, []queryCase{
			{name: "inner", sql: `SELECT s.FirstName, a.Title FROM Singers s JOIN Albums a ON s.SingerId = a.SingerId WHERE a.Sales > 100 ORDER BY a.Sales`,
				want: rows(row("Marc", "Go Go Go"), row("Catalina", "Green"))},
			{name: "left", sql: `SELECT s.SingerId, a.AlbumId FROM Singers s LEFT JOIN Albums a ON s.SingerId = a.SingerId ORDER BY s.SingerId, a.AlbumId`,
				want: rows(row(int64(1), int64(1)), row(int64(1), int64(2)), row(int64(2), int64(1)), row(int64(2), int64(2)), row(int64(2), int64(3)), row(int64(3), nil), row(int64(4), nil))},
			{name: "cross", sql: `SELECT COUNT(*) FROM Singers CROSS JOIN Albums`, wantTypes: []string{"INT64"}, want: rows(row(int64(20)))},
			{name: "comma", sql: `SELECT COUNT(*) FROM Singers s, Albums a WHERE s.SingerId = a.SingerId`, want: rows(row(int64(5)))},
			{name: "using", sql: `SELECT SingerId, Title FROM Singers JOIN Albums USING (SingerId) WHERE SingerId = 1 ORDER BY Title`,
				want: rows(row(int64(1), "Go Go Go"), row(int64(1), "Total Junk"))},
			{name: "full outer", sql: `SELECT x, y FROM UNNEST([1, 2]) AS x FULL JOIN UNNEST([2, 3]) AS y ON x = y ORDER BY COALESCE(x, y)`,
				want: rows(row(int64(1), nil), row(int64(2), int64(2)), row(nil, int64(3)))},
			{name: "self join", sql: `SELECT a.FirstName, b.FirstName FROM Singers a JOIN Singers b ON a.Age = b.Age AND a.SingerId < b.SingerId`,
				want: rows(row("Catalina", "Lea"))},
			{name: "hash join hint", sql: `SELECT COUNT(*) FROM Singers s JOIN@{JOIN_METHOD=HASH_JOIN} Albums a ON s.SingerId = a.SingerId`, want: rows(row(int64(5)))},
			{name: "apply join hint", sql: `SELECT COUNT(*) FROM Singers s INNER JOIN@{JOIN_METHOD=APPLY_JOIN} Albums a ON s.SingerId = a.SingerId`, want: rows(row(int64(5)))},
			{name: "force index", sql: `SELECT Title FROM Albums@{FORCE_INDEX=AlbumsByTitle} WHERE Title >= 'G' ORDER BY Title`,
				want: rows(row("Go Go Go"), row("Green"), row("Terrified"), row("Total Junk"))},
			{name: "force base table", sql: `SELECT COUNT(*) FROM Albums@{FORCE_INDEX=_BASE_TABLE}`, want: rows(row(int64(5)))},
			{name: "statement hint", sql: `@{USE_ADDITIONAL_PARALLELISM=TRUE} SELECT COUNT(*) FROM Singers`, want: rows(row(int64(4)))},
		})
	})

	t.Run("Aggregates", func(t *testing.T) {
		t.Parallel()
		runQueryCases(t, client, []queryCase{
			{name: "group by having", sql: `SELECT SingerId, COUNT(*) AS n, SUM(Sales) FROM Albums GROUP BY SingerId HAVING COUNT(*) > 1 ORDER BY SingerId`,
				wantTypes: []string{"INT64", "INT64", "INT64"},
				want:      rows(row(int64(1), int64(2), int64(300)), row(int64(2), int64(3), int64(350)))},
			{name: "null handling", sql: `SELECT COUNT(*), COUNT(Sales), SUM(Sales), AVG(Sales), MIN(Sales), MAX(Sales) FROM Albums`,
				wantTypes: []string{"INT64", "INT64", "INT64", "FLOAT64", "INT64", "INT64"},
				want:      rows(row(int64(5), int64(4), int64(650), 162.5, int64(50), int64(300)))},
			{name: "empty input", sql: `SELECT COUNT(*), SUM(Sales), MAX(Title) FROM Albums WHERE SingerId = 99`,
				want: rows(row(int64(0), nil, nil))},
			{name: "count distinct", sql: `SELECT COUNT(DISTINCT Age) FROM Singers`, want: rows(row(int64(2)))},
			{name: "group by null key", sql: `SELECT Age, COUNT(*) FROM Singers GROUP BY Age ORDER BY Age`,
				want: rows(row(nil, int64(1)), row(int64(25), int64(2)), row(int64(30), int64(1)))},
			// Without ORDER BY inside the call the element order is unspecified, so only
			// order-independent properties are checked for several rows.
			{name: "array_agg string_agg", sql: `SELECT ARRAY_LENGTH(ARRAY_AGG(Title)), LENGTH(STRING_AGG(Title, ',')), ARRAY_AGG(Title HAVING MAX Sales), STRING_AGG(Title) FROM Albums WHERE SingerId = 1 AND AlbumId = 2`,
				wantTypes: []string{"INT64", "INT64", "ARRAY<STRING>", "STRING"},
				want:      rows(row(int64(1), int64(8), []any{"Go Go Go"}, "Go Go Go"))},
			{name: "array_agg of several rows", sql: `SELECT ARRAY_LENGTH(ARRAY_AGG(Title)), LENGTH(STRING_AGG(Title, ',')) FROM Albums WHERE SingerId = 1`,
				want: rows(row(int64(2), int64(19)))},
			{name: "array_agg with nulls", sql: `SELECT ARRAY_LENGTH(ARRAY_AGG(Sales IGNORE NULLS)) FROM Albums`, want: rows(row(int64(4)))},
			{name: "logical aggregates", sql: `SELECT LOGICAL_AND(Sales > 10), LOGICAL_OR(Sales > 250), COUNTIF(Sales >= 100) FROM Albums`,
				want: rows(row(true, true, int64(3)))},
			{name: "group by expression", sql: `SELECT MOD(AlbumId, 2) AS odd, COUNT(*) FROM Albums GROUP BY odd ORDER BY odd`,
				want: rows(row(int64(0), int64(2)), row(int64(1), int64(3)))},
		})
	})

	t.Run("Ordering", func(t *testing.T) {
		t.Parallel()
		runQueryCases(t, client, []queryCase{
			{name: "nulls first ascending", sql: `SELECT Age FROM Singers ORDER BY Age, SingerId`,
				want: rows(row(nil), row(int64(25)), row(int64(25)), row(int64(30)))},
			{name: "nulls last descending", sql: `SELECT Age FROM Singers ORDER BY Age DESC`,
				want: rows(row(int64(30)), row(int64(25)), row(int64(25)), row(nil))},
			{name: "mixed directions", sql: `SELECT Age, FirstName FROM Singers ORDER BY Age DESC, FirstName ASC`,
				want: rows(row(int64(30), "Marc"), row(int64(25), "Catalina"), row(int64(25), "Lea"), row(nil, "Alice"))},
			{name: "order by ordinal", sql: `SELECT FirstName, SingerId FROM Singers ORDER BY 2 DESC`,
				want: rows(row("Lea", int64(4)), row("Alice", int64(3)), row("Catalina", int64(2)), row("Marc", int64(1)))},
			{name: "strings by code point", sql: `SELECT s FROM UNNEST(['b', 'B', 'a', 'é', 'A']) AS s ORDER BY s`,
				want: rows(row("A"), row("B"), row("a"), row("b"), row("é"))},
			{name: "limit offset params", sql: `SELECT SingerId FROM Singers ORDER BY SingerId LIMIT @l OFFSET @o`,
				params: map[string]any{"l": 2, "o": 1}, want: rows(row(int64(2)), row(int64(3)))},
			{name: "limit zero", sql: `SELECT SingerId FROM Singers LIMIT 0`, want: nil},
			{name: "distinct", sql: `SELECT DISTINCT Age FROM Singers ORDER BY Age`,
				want: rows(row(nil), row(int64(25)), row(int64(30)))},
		})
	})

	t.Run("SetOperations", func(t *testing.T) {
		t.Parallel()
		runQueryCases(t, client, []queryCase{
			{name: "union all", sql: `SELECT x FROM (SELECT 1 AS x UNION ALL SELECT 1 UNION ALL SELECT 2) ORDER BY x`,
				want: rows(row(int64(1)), row(int64(1)), row(int64(2)))},
			{name: "union distinct", sql: `SELECT x FROM (SELECT 1 AS x UNION DISTINCT SELECT 1 UNION DISTINCT SELECT 2) ORDER BY x`,
				want: rows(row(int64(1)), row(int64(2)))},
			{name: "intersect distinct", sql: `SELECT Age FROM Singers INTERSECT DISTINCT SELECT 25 ORDER BY Age`,
				want: rows(row(int64(25)))},
			{name: "except distinct", sql: `SELECT SingerId FROM Singers EXCEPT DISTINCT SELECT SingerId FROM Albums ORDER BY SingerId`,
				want: rows(row(int64(3)), row(int64(4)))},
			{name: "union with order and limit", sql: `SELECT SingerId FROM Singers UNION ALL SELECT AlbumId FROM Albums ORDER BY SingerId DESC LIMIT 3`,
				want: rows(row(int64(4)), row(int64(3)), row(int64(3)))},
			{name: "union supertype", sql: `SELECT x FROM (SELECT 1 AS x UNION ALL SELECT 2.5) ORDER BY x`,
				wantTypes: []string{"FLOAT64"}, want: rows(row(1.0), row(2.5))},
		})
	})

	t.Run("Subqueries", func(t *testing.T) {
		t.Parallel()
		runQueryCases(t, client, []queryCase{
			{name: "with", sql: `WITH big AS (SELECT SingerId FROM Albums WHERE Sales >= 200), names AS (SELECT SingerId, FirstName FROM Singers)
				SELECT n.FirstName FROM big JOIN names n USING (SingerId) ORDER BY n.FirstName`,
				want: rows(row("Catalina"), row("Marc"))},
			{name: "correlated scalar", sql: `SELECT FirstName, (SELECT COUNT(*) FROM Albums a WHERE a.SingerId = s.SingerId) FROM Singers s ORDER BY SingerId`,
				want: rows(row("Marc", int64(2)), row("Catalina", int64(3)), row("Alice", int64(0)), row("Lea", int64(0)))},
			{name: "scalar empty is null", sql: `SELECT (SELECT Title FROM Albums WHERE SingerId = 99)`, want: rows(row(nil))},
			{name: "exists", sql: `SELECT SingerId FROM Singers s WHERE EXISTS (SELECT 1 FROM Albums a WHERE a.SingerId = s.SingerId) ORDER BY SingerId`,
				want: rows(row(int64(1)), row(int64(2)))},
			{name: "not exists", sql: `SELECT SingerId FROM Singers s WHERE NOT EXISTS (SELECT 1 FROM Albums a WHERE a.SingerId = s.SingerId) ORDER BY SingerId`,
				want: rows(row(int64(3)), row(int64(4)))},
			{name: "in subquery", sql: `SELECT FirstName FROM Singers WHERE SingerId IN (SELECT SingerId FROM Albums WHERE Sales > 150) ORDER BY FirstName`,
				want: rows(row("Catalina"), row("Marc"))},
			{name: "not in with null", sql: `SELECT COUNT(*) FROM Singers WHERE SingerId NOT IN (SELECT Sales FROM Albums)`, want: rows(row(int64(0)))},
			{name: "array subquery", sql: `SELECT ARRAY(SELECT Title FROM Albums WHERE SingerId = 1 ORDER BY AlbumId)`,
				wantTypes: []string{"ARRAY<STRING>"}, want: rows(row([]any{"Total Junk", "Go Go Go"}))},
			{name: "empty array subquery", sql: `SELECT ARRAY(SELECT Title FROM Albums WHERE SingerId = 99)`, want: rows(row([]any{}))},
			{name: "derived table", sql: `SELECT MAX(n) FROM (SELECT SingerId, COUNT(*) AS n FROM Albums GROUP BY SingerId)`, want: rows(row(int64(3)))},
			{name: "unnest with offset", sql: `SELECT x, off FROM UNNEST(@arr) AS x WITH OFFSET AS off ORDER BY off`,
				params: map[string]any{"arr": []string{"c", "a", "b"}},
				want:   rows(row("c", int64(0)), row("a", int64(1)), row("b", int64(2)))},
			{name: "in unnest", sql: `SELECT SingerId FROM Singers WHERE SingerId IN UNNEST(@ids) ORDER BY SingerId`,
				params: map[string]any{"ids": []int64{4, 1, 9}}, want: rows(row(int64(1)), row(int64(4)))},
			{name: "in unnest empty", sql: `SELECT COUNT(*) FROM Singers WHERE SingerId IN UNNEST(@ids)`,
				params: map[string]any{"ids": []int64{}}, want: rows(row(int64(0)))},
			{name: "in list", sql: `SELECT COUNT(*) FROM Singers WHERE FirstName IN ('Marc', 'Lea', 'Nobody')`, want: rows(row(int64(2)))},
			{name: "between and like", sql: `SELECT FirstName FROM Singers WHERE Age BETWEEN 26 AND 30 OR LastName LIKE 'Tr%' ORDER BY FirstName`,
				want: rows(row("Alice"), row("Marc"))},
			{name: "case", sql: `SELECT CASE WHEN Age IS NULL THEN 'unknown' WHEN Age < 28 THEN 'young' ELSE 'old' END FROM Singers ORDER BY SingerId`,
				want: rows(row("old"), row("young"), row("unknown"), row("young"))},
			{name: "param in where", sql: `SELECT FirstName FROM Singers WHERE LastName = @last`,
				params: map[string]any{"last": "Smith"}, want: rows(row("Catalina"))},
		})
	})

	t.Run("Lexical", func(t *testing.T) {
		t.Parallel()
		runQueryCases(t, client, []queryCase{
			// Table and column names are case-insensitive; keywords too.
			{name: "case insensitive names", sql: `select firstname from SINGERS where SingerID = 1`, want: rows(row("Marc"))},
			{name: "comments", sql: "SELECT /* block */ 1 -- line\n + 1 # hash\n", want: rows(row(int64(2)))},
			{name: "quoted identifiers", sql: "SELECT `select`.`from` FROM (SELECT 5 AS `from`) AS `select`", want: rows(row(int64(5)))},
			{name: "string literal forms", sql: `SELECT "dq", 'sq', """tri
ple""", r'\d', b'\x41', 'it\'s'`,
				want: rows(row("dq", "sq", "tri\nple", `\d`, []byte("A"), "it's"))},
			{name: "numeric literal forms", sql: `SELECT 0x1F, 1e3, .5, 1.`, want: rows(row(int64(31), 1000.0, 0.5, 1.0))},
		})
	})

	t.Run("InformationSchema", func(t *testing.T) {
		t.Parallel()
		runQueryCases(t, client, []queryCase{
			{name: "tables", sql: `SELECT TABLE_NAME, PARENT_TABLE_NAME, ON_DELETE_ACTION FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = '' ORDER BY TABLE_NAME`,
				want: rows(row("Albums", "Singers", "CASCADE"), row("Singers", nil, nil))},
			{name: "columns", sql: `SELECT COLUMN_NAME, ORDINAL_POSITION, IS_NULLABLE, SPANNER_TYPE FROM INFORMATION_SCHEMA.COLUMNS
				WHERE TABLE_SCHEMA = '' AND TABLE_NAME = 'Singers' ORDER BY ORDINAL_POSITION`,
				want: rows(row("SingerId", int64(1), "NO", "INT64"), row("FirstName", int64(2), "YES", "STRING(MAX)"),
					row("LastName", int64(3), "YES", "STRING(MAX)"), row("Age", int64(4), "YES", "INT64"))},
			{name: "indexes", sql: `SELECT INDEX_NAME, INDEX_TYPE, IS_UNIQUE, IS_NULL_FILTERED FROM INFORMATION_SCHEMA.INDEXES
				WHERE TABLE_SCHEMA = '' AND TABLE_NAME = 'Albums' ORDER BY INDEX_NAME`,
				want: rows(row("AlbumsByTitle", "INDEX", false, false), row("PRIMARY_KEY", "PRIMARY_KEY", true, false))},
			{name: "index columns", sql: `SELECT INDEX_NAME, COLUMN_NAME, ORDINAL_POSITION, COLUMN_ORDERING FROM INFORMATION_SCHEMA.INDEX_COLUMNS
				WHERE TABLE_SCHEMA = '' AND TABLE_NAME = 'Albums' ORDER BY INDEX_NAME, ORDINAL_POSITION`,
				want: rows(row("AlbumsByTitle", "Title", int64(1), "ASC"),
					row("PRIMARY_KEY", "SingerId", int64(1), "ASC"), row("PRIMARY_KEY", "AlbumId", int64(2), "ASC"))},
		})
	})
}

func TestFunctions(t *testing.T) {
	t.Parallel()
	client := newDB(t)
	runQueryCases(t, client, []queryCase{
		// Arithmetic.
		{name: "slash is float division", sql: `SELECT 5 / 2, -5 / 2, 4 / 2`, wantTypes: []string{"FLOAT64", "FLOAT64", "FLOAT64"}, want: rows(row(2.5, -2.5, 2.0))},
		{name: "div truncates", sql: `SELECT DIV(5, 2), DIV(-5, 2), MOD(5, 2), MOD(-5, 2)`, wantTypes: []string{"INT64", "INT64", "INT64", "INT64"},
			want: rows(row(int64(2), int64(-2), int64(1), int64(-1)))},
		{name: "int arithmetic stays int", sql: `SELECT 7 + 3, 7 - 10, 6 * 7, -(-3)`, wantTypes: []string{"INT64", "INT64", "INT64", "INT64"},
			want: rows(row(int64(10), int64(-3), int64(42), int64(3)))},
		{name: "math", sql: `SELECT ABS(-3), SIGN(-5), ROUND(2.5), ROUND(-2.5), ROUND(1.2345, 2), FLOOR(2.7), CEIL(2.1), TRUNC(-2.7), SQRT(16), POW(2, 10)`,
			want: rows(row(int64(3), int64(-1), 3.0, -3.0, 1.23, 2.0, 3.0, -2.0, 4.0, 1024.0))},
		{name: "greatest least", sql: `SELECT GREATEST(1, 5, 3), LEAST('b', 'a'), GREATEST(1, NULL)`, want: rows(row(int64(5), "a", nil))},
		{name: "safe and ieee divide", sql: `SELECT SAFE_DIVIDE(1, 0), IEEE_DIVIDE(1, 0), IEEE_DIVIDE(-1, 0), IS_NAN(IEEE_DIVIDE(0, 0)), IS_INF(IEEE_DIVIDE(1, 0))`,
			want: rows(row(nil, math.Inf(1), math.Inf(-1), true, true))},
		{name: "float specials compare", sql: `SELECT IEEE_DIVIDE(0, 0) = IEEE_DIVIDE(0, 0), IEEE_DIVIDE(1, 0) > 1e308`, want: rows(row(false, true))},
		{name: "bitwise", sql: `SELECT 6 & 3, 6 | 3, 6 ^ 3, 1 << 4, 256 >> 4, ~0`, want: rows(row(int64(2), int64(7), int64(5), int64(16), int64(16), int64(-1)))},
		{name: "numeric arithmetic", sql: `SELECT NUMERIC '0.1' + NUMERIC '0.2', NUMERIC '1' / NUMERIC '3'`, wantTypes: []string{"NUMERIC", "NUMERIC"},
			want: rows(row("0.3", "0.333333333"))},

		// Strings.
		{name: "concat", sql: `SELECT CONCAT('a', 'b', 'c'), 'x' || 'y', CONCAT('a', NULL)`, want: rows(row("abc", "xy", nil))},
		{name: "case and length", sql: `SELECT UPPER('héllo'), LOWER('ABC'), LENGTH('héllo'), BYTE_LENGTH('héllo'), CHAR_LENGTH('日本')`,
			want: rows(row("HÉLLO", "abc", int64(5), int64(6), int64(2)))},
		{name: "substr", sql: `SELECT SUBSTR('hello', 2, 3), SUBSTR('hello', -3), SUBSTR('héllo', 2, 1), SUBSTR('abc', 5)`, want: rows(row("ell", "llo", "é", ""))},
		{name: "search", sql: `SELECT STRPOS('hello', 'l'), STARTS_WITH('hello', 'he'), ENDS_WITH('hello', 'lo'), STRPOS('hello', 'z')`,
			want: rows(row(int64(3), true, true, int64(0)))},
		{name: "unicode positions", sql: `SELECT STRPOS('héllo', 'l'), REVERSE('héllo'), LPAD('é', 3, 'ü'), SUBSTR('日本語', 2)`,
			want: rows(row(int64(3), "olléh", "üüé", "本語"))},
		{name: "trim pad repeat", sql: `SELECT TRIM('  x  '), LTRIM('xxy', 'x'), RTRIM('yxx', 'x'), LPAD('7', 3, '0'), RPAD('a', 3, '-'), REPEAT('ab', 3), REVERSE('abc')`,
			want: rows(row("x", "y", "y", "007", "a--", "ababab", "cba"))},
		{name: "replace split join", sql: `SELECT REPLACE('a-b-c', '-', '+'), SPLIT('a,b,,c', ','), ARRAY_TO_STRING(['a', 'b'], '-')`,
			want: rows(row("a+b+c", []any{"a", "b", "", "c"}, "a-b"))},
		{name: "regexp", sql: `SELECT REGEXP_CONTAINS('abc123', r'\d+'), REGEXP_EXTRACT('foo123bar', r'[0-9]+'), REGEXP_REPLACE('a1b2', r'\d', '#'), REGEXP_EXTRACT_ALL('a1b22', r'\d+')`,
			want: rows(row(true, "123", "a#b#", []any{"1", "22"}))},
		{name: "like", sql: `SELECT 'abc' LIKE 'a%', 'abc' LIKE '_b_', 'abc' LIKE 'A%', 'a%c' LIKE 'a\\%c'`, want: rows(row(true, true, false, true))},
		{name: "format", sql: `SELECT FORMAT('%d-%s-%.2f', 5, 'x', 1.5), FORMAT('%05d', 42)`, want: rows(row("5-x-1.50", "00042"))},
		{name: "bytes and hex", sql: `SELECT TO_HEX(b'\x01\xab'), FROM_HEX('01ab'), TO_BASE64(b'hi'), FROM_BASE64('aGk='), CAST('hé' AS BYTES)`,
			want: rows(row("01ab", []byte{0x01, 0xab}, "aGk=", []byte("hi"), []byte("hé")))},
		{name: "code points", sql: `SELECT TO_CODE_POINTS('ab'), CODE_POINTS_TO_STRING([104, 105])`,
			want: rows(row([]any{int64(97), int64(98)}, "hi"))},

		// Casts.
		{name: "cast", sql: `SELECT CAST('42' AS INT64), CAST(42 AS STRING), CAST(1.5 AS STRING), CAST('2024-01-02' AS DATE), CAST(2.5 AS INT64), CAST(-2.5 AS INT64), CAST(TRUE AS STRING)`,
			want: rows(row(int64(42), "42", "1.5", date("2024-01-02"), int64(3), int64(-3), "true"))},
		{name: "cast hex string", sql: `SELECT CAST('0x1F' AS INT64)`, want: rows(row(int64(31)))},
		{name: "safe cast", sql: `SELECT SAFE_CAST('x' AS INT64), SAFE_CAST('2024-13-01' AS DATE), SAFE_CAST('1.5' AS FLOAT64)`, want: rows(row(nil, nil, 1.5))},
		{name: "cast timestamp to string", sql: `SELECT CAST(TIMESTAMP '2024-01-02T03:04:05Z' AS STRING)`, want: rows(row("2024-01-01 19:04:05-08"))},

		// Dates and timestamps. Spanner's default time zone is America/Los_Angeles.
		{name: "timestamp add diff", sql: `SELECT TIMESTAMP_ADD(TIMESTAMP '2024-01-01T00:00:00Z', INTERVAL 90 MINUTE),
				TIMESTAMP_SUB(TIMESTAMP '2024-01-01T00:00:00Z', INTERVAL 1 SECOND),
				TIMESTAMP_DIFF(TIMESTAMP '2024-01-02T00:00:00Z', TIMESTAMP '2024-01-01T00:00:00Z', SECOND),
				TIMESTAMP_DIFF(TIMESTAMP '2024-01-01T00:00:01.5Z', TIMESTAMP '2024-01-01T00:00:00Z', MILLISECOND)`,
			want: rows(row(ts("2024-01-01T01:30:00Z"), ts("2023-12-31T23:59:59Z"), int64(86400), int64(1500)))},
		{name: "nanosecond arithmetic", sql: `SELECT TIMESTAMP_ADD(TIMESTAMP '2024-01-01T00:00:00Z', INTERVAL 1 NANOSECOND),
				TIMESTAMP_DIFF(TIMESTAMP '2024-01-01T00:00:00.000000123Z', TIMESTAMP '2024-01-01T00:00:00Z', NANOSECOND),
				TIMESTAMP '2024-01-01T00:00:00.000000001Z' > TIMESTAMP '2024-01-01T00:00:00Z'`,
			want: rows(row(ts("2024-01-01T00:00:00.000000001Z"), int64(123), true))},
		{name: "timestamp trunc", sql: `SELECT TIMESTAMP_TRUNC(TIMESTAMP '2024-01-01T10:20:30Z', DAY), TIMESTAMP_TRUNC(TIMESTAMP '2024-01-01T10:20:30Z', DAY, 'UTC'), TIMESTAMP_TRUNC(TIMESTAMP '2024-01-01T10:20:30.5Z', MINUTE)`,
			want: rows(row(ts("2024-01-01T08:00:00Z"), ts("2024-01-01T00:00:00Z"), ts("2024-01-01T10:20:00Z")))},
		{name: "extract", sql: `SELECT EXTRACT(HOUR FROM TIMESTAMP '2024-01-01T10:00:00Z'), EXTRACT(HOUR FROM TIMESTAMP '2024-01-01T10:00:00Z' AT TIME ZONE 'UTC'),
				EXTRACT(YEAR FROM DATE '2024-05-17'), EXTRACT(DAYOFWEEK FROM DATE '2024-01-07'), EXTRACT(DATE FROM TIMESTAMP '2024-01-01T05:00:00Z')`,
			want: rows(row(int64(2), int64(10), int64(2024), int64(1), date("2023-12-31")))},
		{name: "format timestamp", sql: `SELECT FORMAT_TIMESTAMP('%Y-%m-%d %H:%M:%S', TIMESTAMP '2024-01-01T10:00:00Z'), FORMAT_TIMESTAMP('%Y-%m-%d %H:%M:%S', TIMESTAMP '2024-01-01T10:00:00Z', 'UTC'), FORMAT_DATE('%Y/%m/%d', DATE '2024-03-05')`,
			want: rows(row("2024-01-01 02:00:00", "2024-01-01 10:00:00", "2024/03/05"))},
		{name: "parse", sql: `SELECT PARSE_DATE('%Y%m%d', '20240102'), PARSE_TIMESTAMP('%Y-%m-%d %H:%M:%S', '2024-01-02 03:04:05', 'UTC')`,
			want: rows(row(date("2024-01-02"), ts("2024-01-02T03:04:05Z")))},
		{name: "date arithmetic", sql: `SELECT DATE_ADD(DATE '2024-01-31', INTERVAL 1 MONTH), DATE_SUB(DATE '2024-03-01', INTERVAL 1 DAY), DATE_DIFF(DATE '2024-03-01', DATE '2024-02-01', DAY), DATE_TRUNC(DATE '2024-05-17', MONTH)`,
			want: rows(row(date("2024-02-29"), date("2024-02-29"), int64(29), date("2024-05-01")))},
		{name: "date from timestamp", sql: `SELECT DATE(TIMESTAMP '2024-01-01T05:00:00Z'), DATE(TIMESTAMP '2024-01-01T05:00:00Z', 'UTC'), DATE(2024, 2, 29)`,
			want: rows(row(date("2023-12-31"), date("2024-01-01"), date("2024-02-29")))},
		{name: "unix conversions", sql: `SELECT UNIX_SECONDS(TIMESTAMP '1970-01-01T00:01:00Z'), UNIX_MILLIS(TIMESTAMP '1970-01-01T00:00:01.5Z'), UNIX_MICROS(TIMESTAMP '1970-01-01T00:00:00.000002Z'),
				TIMESTAMP_SECONDS(60), TIMESTAMP_MILLIS(1500), TIMESTAMP_MICROS(2), UNIX_DATE(DATE '1970-01-11')`,
			want: rows(row(int64(60), int64(1500), int64(2), ts("1970-01-01T00:01:00Z"), ts("1970-01-01T00:00:01.5Z"), ts("1970-01-01T00:00:00.000002Z"), int64(10)))},
		{name: "timestamp from string", sql: `SELECT TIMESTAMP('2024-01-02 03:04:05+00'), TIMESTAMP('2024-01-02', 'UTC')`,
			want: rows(row(ts("2024-01-02T03:04:05Z"), ts("2024-01-02T00:00:00Z")))},

		// JSON.
		{name: "json value and query", sql: `SELECT JSON_VALUE(JSON '{"a": {"b": "x"}}', '$.a.b'), JSON_VALUE(JSON '{"a": 1}', '$.missing'), JSON_QUERY(JSON '{"a": {"b": 1}}', '$.a'), JSON_VALUE('{"n": 10}', '$.n')`,
			wantTypes: []string{"STRING", "STRING", "JSON", "STRING"},
			want:      rows(row("x", nil, `{"b":1}`, "10"))},
		{name: "json query array", sql: `SELECT JSON_QUERY_ARRAY(JSON '{"a": [1, "x"]}', '$.a'), JSON_VALUE_ARRAY(JSON '["a", "b"]')`,
			wantTypes: []string{"ARRAY<JSON>", "ARRAY<STRING>"},
			want:      rows(row([]any{"1", `"x"`}, []any{"a", "b"}))},
		{name: "json field access", sql: `SELECT JSON '{"a": {"b": [10, 20]}}'.a.b[1], JSON_TYPE(JSON '[1]'), TO_JSON_STRING(JSON '{"y": 1, "x": 2}'), INT64(JSON '5'), STRING(JSON '"s"'), BOOL(JSON 'true')`,
			want: rows(row("20", "array", `{"x":2,"y":1}`, int64(5), "s", true))},

		// Arrays.
		{name: "array functions", sql: `SELECT ARRAY_LENGTH([1, 2, 3]), ARRAY_LENGTH(ARRAY<INT64>[]), ARRAY_CONCAT([1], [2, 3]), ARRAY_REVERSE([1, 2, 3]), ARRAY_INCLUDES([1, 2], 2)`,
			want: rows(row(int64(3), int64(0), []any{int64(1), int64(2), int64(3)}, []any{int64(3), int64(2), int64(1)}, true))},
		{name: "array indexing", sql: `SELECT [10, 20, 30][OFFSET(1)], [10, 20, 30][ORDINAL(1)], [10, 20][SAFE_OFFSET(5)], [10, 20][SAFE_ORDINAL(0)]`,
			want: rows(row(int64(20), int64(10), nil, nil))},
		{name: "generate array", sql: `SELECT GENERATE_ARRAY(1, 7, 3), GENERATE_DATE_ARRAY(DATE '2024-01-30', DATE '2024-02-02', INTERVAL 1 DAY)`,
			want: rows(row([]any{int64(1), int64(4), int64(7)}, []any{date("2024-01-30"), date("2024-01-31"), date("2024-02-01"), date("2024-02-02")}))},
		{name: "array min max", sql: `SELECT ARRAY_MIN([3, 1, 2]), ARRAY_MAX(['a', 'c', 'b']), ARRAY_FIRST([5, 6]), ARRAY_LAST([5, 6])`,
			want: rows(row(int64(1), "c", int64(5), int64(6)))},

		// Hashes, with values from Google's documentation of FARM_FINGERPRINT.
		{name: "farm fingerprint", sql: `SELECT FARM_FINGERPRINT('1footrue'), FARM_FINGERPRINT('2applefalse'), FARM_FINGERPRINT('3true'),
				FARM_FINGERPRINT(CONCAT(CAST(1 AS STRING), 'foo', CAST(TRUE AS STRING)))`,
			want: rows(row(int64(-1541654101129638711), int64(2794438866806483259), int64(-4880158226897771312), int64(-1541654101129638711)))},
		{name: "sha", sql: `SELECT TO_HEX(SHA256('abc')), TO_HEX(SHA1('abc'))`,
			want: rows(row("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "a9993e364706816aba3e25717850c26c9cd0d89d"))},

		// Conditionals.
		{name: "conditionals", sql: `SELECT IF(1 > 2, 'a', 'b'), NULLIF(1, 1), NULLIF(1, 2), IFNULL(NULL, 0), CASE 2 WHEN 1 THEN 'one' WHEN 2 THEN 'two' END`,
			want: rows(row("b", nil, int64(1), int64(0), "two"))},
	})

	t.Run("GENERATE_UUID", func(t *testing.T) {
		t.Parallel()
		res := query(t, client.Single(), spanner.NewStatement(`SELECT GENERATE_UUID(), GENERATE_UUID()`))
		if diff := cmp.Diff([]string{"STRING", "STRING"}, res.Types); diff != "" {
			t.Errorf("types (-want +got):\n%s", diff)
		}
		v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
		a, _ := res.Rows[0][0].(string)
		b, _ := res.Rows[0][1].(string)
		for _, u := range []string{a, b} {
			if !v4.MatchString(u) {
				t.Errorf("GENERATE_UUID() = %q, want a lowercase version 4 UUID", u)
			}
		}
		if a == b {
			t.Errorf("two GENERATE_UUID() calls returned the same value %q", a)
		}
	})

	t.Run("CURRENT_TIMESTAMP", func(t *testing.T) {
		t.Parallel()
		// Within one statement CURRENT_TIMESTAMP is a single value.
		res := query(t, client.Single(), spanner.NewStatement(`SELECT CURRENT_TIMESTAMP() = CURRENT_TIMESTAMP(), CURRENT_DATE() IS NOT NULL`))
		if diff := cmp.Diff(rows(row(true, true)), res.Rows); diff != "" {
			t.Errorf("rows (-want +got):\n%s", diff)
		}
	})
}

func TestQueryErrors(t *testing.T) {
	t.Parallel()
	client := newDB(t, querySchema...)
	seedQueries(t, client)
	tests := []struct {
		name    string
		sql     string
		params  map[string]any
		code    codes.Code
		msgPart []string
	}{
		{"syntax", `SELEC 1`, nil, codes.InvalidArgument, []string{"Syntax error"}},
		{"unknown table", `SELECT * FROM Nope`, nil, codes.InvalidArgument, []string{"Table not found: Nope"}},
		{"unknown column", `SELECT Nope FROM Singers`, nil, codes.InvalidArgument, []string{"Unrecognized name: Nope"}},
		{"type mismatch", `SELECT 1 + 'a'`, nil, codes.InvalidArgument, []string{"No matching signature"}},
		{"unknown function", `SELECT NO_SUCH_FUNCTION(1)`, nil, codes.InvalidArgument, []string{"Function not found"}},
		{"missing parameter", `SELECT @nope`, nil, codes.InvalidArgument, []string{"nope"}},
		{"unknown index hint", `SELECT 1 FROM Singers@{FORCE_INDEX=NoSuchIndex}`, nil, codes.InvalidArgument, []string{"NoSuchIndex"}},
		{"int64 overflow add", `SELECT @max + 1`, map[string]any{"max": int64(math.MaxInt64)}, codes.OutOfRange, []string{"int64 overflow"}},
		{"int64 overflow mul", `SELECT @max * 2`, map[string]any{"max": int64(math.MaxInt64)}, codes.OutOfRange, []string{"overflow"}},
		{"int64 overflow neg", `SELECT -@min`, map[string]any{"min": int64(math.MinInt64)}, codes.OutOfRange, []string{"overflow"}},
		{"division by zero", `SELECT 1 / 0`, nil, codes.OutOfRange, []string{"division by zero"}},
		{"div by zero", `SELECT DIV(1, @z)`, map[string]any{"z": int64(0)}, codes.OutOfRange, []string{"division by zero"}},
		{"mod by zero", `SELECT MOD(1, @z)`, map[string]any{"z": int64(0)}, codes.OutOfRange, []string{"division by zero"}},
		{"bad cast", `SELECT CAST(@s AS INT64)`, map[string]any{"s": "abc"}, codes.OutOfRange, []string{"abc"}},
		{"int64 overflow in SUM", `SELECT SUM(x) FROM UNNEST([@max, 1]) AS x`, map[string]any{"max": int64(math.MaxInt64)}, codes.OutOfRange, []string{"overflow"}},
		{"numeric overflow", `SELECT NUMERIC '99999999999999999999999999999' * 10`, nil, codes.OutOfRange, nil},
		{"cast NaN to int64", `SELECT CAST(IEEE_DIVIDE(0, 0) AS INT64)`, nil, codes.OutOfRange, nil},
		{"cast float overflow to int64", `SELECT CAST(1e20 AS INT64)`, nil, codes.OutOfRange, nil},
		{"date overflow", `SELECT DATE_ADD(DATE '9999-12-31', INTERVAL 1 DAY)`, nil, codes.OutOfRange, nil},
		{"timestamp overflow", `SELECT TIMESTAMP_ADD(TIMESTAMP '9999-12-31T23:59:59Z', INTERVAL 1 DAY)`, nil, codes.OutOfRange, nil},
		{"array offset out of range", `SELECT [1, 2][OFFSET(@i)]`, map[string]any{"i": int64(5)}, codes.OutOfRange, []string{"out of bounds"}},
		{"scalar subquery more than one row", `SELECT (SELECT SingerId FROM Singers)`, nil, codes.OutOfRange, []string{"more than one"}},
		{"error function", `SELECT ERROR('boom')`, nil, codes.OutOfRange, []string{"boom"}},
		{"dml in read-only transaction", `UPDATE Singers SET Age = 1 WHERE TRUE`, nil, codes.InvalidArgument, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tryQuery(testCtx(t), client.Single(), spanner.Statement{SQL: tt.sql, Params: tt.params})
			checkErr(t, err, tt.code, tt.msgPart...)
		})
	}
}

// TestArrayColumns covers queries over ARRAY columns: correlated UNNEST, membership and
// functions on stored arrays.
func TestArrayColumns(t *testing.T) {
	t.Parallel()
	client := newDB(t, `CREATE TABLE Posts (Id INT64 NOT NULL, Tags ARRAY<STRING(MAX)>, Scores ARRAY<INT64>) PRIMARY KEY (Id)`)
	mustApply(t, client,
		spanner.Insert("Posts", []string{"Id", "Tags", "Scores"}, []any{1, []string{"go", "db"}, []int64{3, 1}}),
		spanner.Insert("Posts", []string{"Id", "Tags", "Scores"}, []any{2, []string{"db"}, []int64{}}),
		spanner.Insert("Posts", []string{"Id", "Tags", "Scores"}, []any{3, []string(nil), []int64(nil)}),
	)
	runQueryCases(t, client, []queryCase{
		{name: "correlated unnest", sql: `SELECT p.Id, tag FROM Posts AS p, UNNEST(p.Tags) AS tag ORDER BY p.Id, tag`,
			want: rows(row(int64(1), "db"), row(int64(1), "go"), row(int64(2), "db"))},
		{name: "correlated unnest with offset", sql: `SELECT p.Id, s, o FROM Posts AS p CROSS JOIN UNNEST(p.Scores) AS s WITH OFFSET AS o ORDER BY p.Id, o`,
			want: rows(row(int64(1), int64(3), int64(0)), row(int64(1), int64(1), int64(1)))},
		{name: "left join unnest keeps empty", sql: `SELECT p.Id, tag FROM Posts AS p LEFT JOIN UNNEST(p.Tags) AS tag ORDER BY p.Id, tag`,
			want: rows(row(int64(1), "db"), row(int64(1), "go"), row(int64(2), "db"), row(int64(3), nil))},
		{name: "membership", sql: `SELECT Id FROM Posts WHERE @tag IN UNNEST(Tags) ORDER BY Id`, params: map[string]any{"tag": "db"},
			want: rows(row(int64(1)), row(int64(2)))},
		{name: "array functions on columns", sql: `SELECT Id, ARRAY_LENGTH(Tags), ARRAY_TO_STRING(Tags, ','), (SELECT SUM(s) FROM UNNEST(Scores) AS s) FROM Posts ORDER BY Id`,
			want: rows(row(int64(1), int64(2), "go,db", int64(4)), row(int64(2), int64(1), "db", nil), row(int64(3), nil, nil, nil))},
		{name: "array column values", sql: `SELECT Tags, Scores FROM Posts ORDER BY Id`,
			wantTypes: []string{"ARRAY<STRING>", "ARRAY<INT64>"},
			want:      rows(row([]any{"go", "db"}, []any{int64(3), int64(1)}), row([]any{"db"}, []any{}), row(nil, nil))},
		{name: "exists over array", sql: `SELECT Id FROM Posts WHERE EXISTS (SELECT 1 FROM UNNEST(Scores) AS s WHERE s > 2)`,
			want: rows(row(int64(1)))},
		{name: "group by ordinal", sql: `SELECT ARRAY_LENGTH(Tags) AS n, COUNT(*) FROM Posts GROUP BY 1 ORDER BY 1`,
			want: rows(row(nil, int64(1)), row(int64(1), int64(1)), row(int64(2), int64(1)))},
		{name: "is true", sql: `SELECT Id FROM Posts WHERE ('go' IN UNNEST(Tags)) IS NOT TRUE ORDER BY Id`,
			want: rows(row(int64(2)), row(int64(3)))},
	})
}
