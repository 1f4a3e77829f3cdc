package sqlgen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// A query that reads one aggregate by key has the key ranges it reads as KeyReads: its root row
// by a key all pinned to parameters, and each select-list subquery's table by a leading part of
// its key pinned to parameters or to the root's key. Any other shape has none, and is validated
// by its tables.
func TestKeyReads(t *testing.T) {
	s := testSchema(t)
	tests := []struct {
		sql  string
		want string // "" for none
	}{
		{"SELECT Name FROM Singers WHERE SingerId = @id", "[Singers(id)]"},
		{"SELECT s.Name FROM Singers AS s WHERE @id = s.SingerId AND s.Name IS NOT NULL", "[Singers(id)]"},
		{`SELECT s.Name, ARRAY(SELECT AS STRUCT a.AlbumId, a.Title FROM Albums AS a WHERE a.SingerId = s.SingerId ORDER BY a.AlbumId) AS Albums,
			(SELECT COUNT(*) FROM Albums AS n WHERE n.SingerId = s.SingerId) AS N,
			EXISTS(SELECT 1 FROM Albums WHERE SingerId = @other AND AlbumId = @album) AS Other
		  FROM Singers AS s WHERE s.SingerId = @id`, "[Singers(id) Albums(id) Albums(id) Albums(other album)]"},
		{"SELECT Title FROM Albums WHERE SingerId = @s AND AlbumId = @a", "[Albums(s a)]"},
		{"SELECT s.Name, ARRAY(SELECT AS STRUCT a.Title FROM Albums AS a WHERE a.SingerId = @s AND a.AlbumId = @a) AS A FROM Singers AS s WHERE s.SingerId = @id FOR UPDATE",
			"[Singers(id)! Albums(s a)!]"}, // FOR UPDATE: the same ranges, locked (! is KeyRead.Lock)
		{"SELECT Name FROM Singers WHERE SingerId IN UNNEST(@ids)", "[Singers(ids...)]"}, // a set of keys
		{"SELECT s.Name, ARRAY(SELECT AS STRUCT a.Title FROM Albums AS a WHERE a.SingerId = s.SingerId) AS A FROM Singers AS s WHERE s.SingerId IN UNNEST(@ids)",
			"[Singers(ids...) Albums(ids...)]"}, // the children of each
		{"SELECT Title FROM Albums WHERE SingerId = @s AND AlbumId IN UNNEST(@ids)", "[Albums(s ids...)]"},
		{"SELECT a.Title, ARRAY(SELECT AS STRUCT s.Name FROM Singers AS s WHERE s.SingerId = a.SingerId) FROM Albums AS a WHERE a.SingerId = @s AND a.AlbumId IN UNNEST(@ids)",
			"[Albums(s ids...) Singers(s)]"},
		{`SELECT ARRAY(SELECT AS STRUCT Name FROM Singers WHERE SingerId = @id) AS S,
			ARRAY(SELECT AS STRUCT Title FROM Albums WHERE SingerId IN UNNEST(@ids)) AS A, @str AS P`, "[Singers(id) Albums(ids...)]"}, // no FROM
		{"SELECT Name, EXISTS(SELECT 1 FROM Albums WHERE SingerId = @s AND AlbumId = @a) AS Has FROM Singers WHERE SingerId = @id",
			"[Singers(id) Albums(s a)]"}, // neither aliased
		{"SELECT s.Name, (SELECT COUNT(*) FROM Albums WHERE SingerId = s.SingerId) AS N FROM Singers AS s WHERE s.SingerId = @id",
			"[Singers(id) Albums(id)]"},
		{"SELECT s.Name, ARRAY(SELECT a.Title FROM Albums AS a WHERE a.SingerId = @s FOR UPDATE) AS A FROM Singers AS s WHERE s.SingerId = @id",
			"[Singers(id) Albums(s)!]"}, // FOR UPDATE of a subquery: its read only
		// Not the shape:
		{"SELECT Name, (SELECT COUNT(*) FROM Singers WHERE SingerId = @other) AS N FROM Singers WHERE SingerId = @id", ""}, // one name for both
		{"SELECT s.Name, (SELECT COUNT(*) FROM Albums AS s WHERE s.SingerId = @other) AS N FROM Singers AS s WHERE s.SingerId = @id", ""},
		{"SELECT Name FROM Singers WHERE SingerId NOT IN UNNEST(@ids)", ""},
		{"SELECT Title FROM Albums WHERE SingerId IN UNNEST(@ids) AND AlbumId = @a", ""},                                                                                            // a key after an array
		{"SELECT s.Name, ARRAY(SELECT AS STRUCT a.Title FROM Albums AS a WHERE a.SingerId = s.SingerId AND a.AlbumId = @a) FROM Singers AS s WHERE s.SingerId IN UNNEST(@ids)", ""}, // the root's array, then a key
		{"SELECT ARRAY(SELECT AS STRUCT Name FROM Singers WHERE Name = @str) AS S", ""},                                                                                             // no FROM, a subquery not by key
		{"SELECT ARRAY(SELECT AS STRUCT Name FROM Singers WHERE SingerId = @id) AS S WHERE @id > 0", ""},
		{"SELECT Title FROM Albums WHERE SingerId = @s", ""},                                 // the root's key not all pinned
		{"SELECT Name FROM Singers WHERE SingerId = @id OR SingerId = @other", ""},           // not a conjunction
		{"SELECT Name FROM Singers WHERE SingerId = @id + 1", ""},                            // pinned by an expression
		{"SELECT Name FROM Singers WHERE SingerId = (SELECT MAX(SingerId) FROM Albums)", ""}, // a subquery in WHERE
		{"SELECT s.Name FROM Singers AS s JOIN Albums AS a USING (SingerId) WHERE s.SingerId = @id", ""},
		{"SELECT s.Name, ARRAY(SELECT Title FROM Albums AS a WHERE a.Title = s.Name) FROM Singers AS s WHERE s.SingerId = @id", ""},     // not by key
		{"SELECT s.Name, (SELECT COUNT(*) FROM Albums AS a WHERE a.AlbumId = s.SingerId) FROM Singers AS s WHERE s.SingerId = @id", ""}, // not a leading key column
		{"SELECT s.Name, COALESCE((SELECT MAX(AlbumId) FROM Albums AS a WHERE a.SingerId = s.SingerId), 0) FROM Singers AS s WHERE s.SingerId = @id", ""},
		{"SELECT s.Name, (SELECT MAX(x) FROM UNNEST(@xs) AS x) FROM Singers AS s WHERE s.SingerId = @id", ""},
		{"SELECT Name FROM Singers WHERE SingerId = @undeclared", ""}, // a parameter of no declared type
		{"WITH t AS (SELECT 1 AS x) SELECT Name FROM Singers WHERE SingerId = @id", ""},
	}
	for _, tt := range tests {
		c, err := compile(t, s, tt.sql, map[string]spantype.Type{"id": spantype.TInt64, "other": spantype.TInt64, "album": spantype.TInt64,
			"s": spantype.TInt64, "a": spantype.TInt64, "str": spantype.TString, "xs": spantype.ArrayOf(spantype.TInt64),
			"ids": spantype.ArrayOf(spantype.TInt64)})
		if err != nil {
			t.Errorf("%s: %v", tt.sql, err)
			continue
		}
		if has := strings.Contains(tt.sql, "FOR UPDATE"); c.ForUpdate != has {
			t.Errorf("%s: ForUpdate %v, want %v", tt.sql, c.ForUpdate, has)
		}
		got := ""
		if len(c.KeyReads) > 0 {
			var parts []string
			for _, r := range c.KeyReads {
				if r.Set {
					r.Params[len(r.Params)-1] += "..."
				}
				lock := ""
				if r.Lock {
					lock = "!"
				}
				parts = append(parts, fmt.Sprintf("%s%v%s", r.Table.Name, r.Params, lock))
			}
			got = fmt.Sprint(parts)
		}
		got = replaceBrackets(got)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: key reads (-want +got):\n%s", tt.sql, diff)
		}
	}
}

// replaceBrackets writes a key read's parameters in parentheses: "Albums[s a]" → "Albums(s a)".
func replaceBrackets(s string) string {
	if s == "" {
		return s
	}
	out := []byte(s)
	depth := 0
	for i, b := range out {
		switch b {
		case '[':
			if depth == 1 {
				out[i] = '('
			}
			depth++
		case ']':
			depth--
			if depth == 1 {
				out[i] = ')'
			}
		}
	}
	return string(out)
}
