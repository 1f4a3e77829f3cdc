package outboxlib_test

import (
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/outboxlib/schema"
)

// The retention constants the library reasons with are the row deletion policies of the schema.
func TestRetentionConstantsMatchTheSchema(t *testing.T) {
	table := regexp.MustCompile(`CREATE TABLE (\w+) \(`)
	policy := regexp.MustCompile(`ROW DELETION POLICY \(OLDER_THAN\(\w+, INTERVAL (\d+) DAY\)\)`)
	ttl := map[string]time.Duration{}
	files, err := fs.Glob(schema.Migrations, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := fs.ReadFile(schema.Migrations, f)
		if err != nil {
			t.Fatal(err)
		}
		ddl := regexp.MustCompile(`--[^\n]*`).ReplaceAllString(string(data), "")
		for _, stmt := range strings.Split(ddl, ";") {
			name, days := table.FindStringSubmatch(stmt), policy.FindStringSubmatch(stmt)
			if name != nil && days != nil {
				n, _ := strconv.Atoi(days[1])
				ttl[name[1]] = time.Duration(n) * 24 * time.Hour
			}
		}
	}
	for table, want := range map[string]time.Duration{"OutboxEvents": outboxlib.OutboxRetention, "ProcessedEvents": outboxlib.DedupRetention} {
		if ttl[table] != want {
			t.Errorf("%s deletes rows after %s in the schema, the library assumes %s", table, ttl[table], want)
		}
	}
}
