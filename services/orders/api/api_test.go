package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/spanmart/spanmart/services/orders/api"
)

// A reconciliation without peers compared nothing: it is written as configured and detail alone,
// not as 0 orders checked; a configured one always has its counts, 0 or not. Both decode back to
// what was written, alone or inside an audit's report.
func TestReconciliationJSON(t *testing.T) {
	at := time.Date(2026, 3, 3, 11, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		rec  api.Reconciliation
		want string
	}{
		{"without peers", api.Reconciliation{Detail: "no peers to compare with"}, `{"configured":false,"detail":"no peers to compare with"}`},
		{"nothing checked", api.Reconciliation{Configured: true, CheckedAt: at, Window: api.Window{From: at.Add(-time.Hour), To: at},
			Truncated: []string{}, Mismatches: []api.Mismatch{}, Flagged: []api.Flagged{}},
			`{"configured":true,"checked_at":"2026-03-03T11:00:00Z","window":{"from":"2026-03-03T10:00:00Z","to":"2026-03-03T11:00:00Z"},` +
				`"checked":0,"partial":false,"truncated":[],"mismatches":[],"flagged":[]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			report, err := json.Marshal(&api.AuditReport{Reconciliation: tt.rec})
			if err != nil {
				t.Fatal(err)
			}
			var back api.AuditReport
			if err := json.Unmarshal(report, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.rec, back.Reconciliation); diff != "" {
				t.Errorf("through an audit's report (-written +read):\n%s", diff)
			}
		})
	}
}
