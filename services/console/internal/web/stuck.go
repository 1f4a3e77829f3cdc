package web

import (
	"net/http"
	"sort"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/topology"
)

// stuckView is GET /stuck: orders' two audit reports, each nil when orders did not give it.
type stuckView struct {
	Stuck          *adminclient.StuckReport
	Reconciliation *adminclient.Reconciliation
	Counts         []statusCount
	Gaps           []gap
}

// statusCount is one watched status and how many orders are stuck in it.
type statusCount struct {
	Status     string
	Count      int
	StuckAfter string
}

// stuck is GET /stuck: the stuck-order detector and the reconciliation, read at once (both are
// live reports with no side effects; POST /admin/audit, which logs and alerts, is Cloud
// Scheduler's).
func (s *Server) stuck(c echo.Context) error {
	ctx, cancel := s.callContext(c)
	defer cancel()
	var (
		wg             sync.WaitGroup
		v              stuckView
		stuckErr, rErr error
		rep            adminclient.StuckReport
		rec            adminclient.Reconciliation
	)
	wg.Go(func() { rep, stuckErr = s.client.StuckOrders(ctx) })
	wg.Go(func() { rec, rErr = s.client.Reconciliation(ctx) })
	wg.Wait()
	if stuckErr != nil {
		v.Gaps = append(v.Gaps, gapOf(topology.Orders, "the stuck orders", stuckErr))
	} else {
		v.Stuck = &rep
		for st, n := range rep.Counts {
			v.Counts = append(v.Counts, statusCount{Status: st, Count: n, StuckAfter: rep.StuckAfter[st]})
		}
		sort.Slice(v.Counts, func(i, j int) bool { return v.Counts[i].Status < v.Counts[j].Status })
	}
	if rErr != nil {
		v.Gaps = append(v.Gaps, gapOf(topology.Orders, "the reconciliation", rErr))
	} else {
		v.Reconciliation = &rec
	}
	return s.render(c, http.StatusOK, "stuck", v)
}
