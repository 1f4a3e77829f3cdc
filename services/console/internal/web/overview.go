package web

import (
	"net/http"
	"sort"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/internal/adminclient"
	"github.com/spanmart/spanmart/internal/topology"
)

// overviewView is the overview page and its refreshed fragment.
type overviewView struct {
	CheckedAt      time.Time
	RefreshSeconds int
	RelayOwner     string // the relay instance that answered; "" when the relay did not
	Sources        []sourceRow
	Consumers      []consumerRow
	Problems       []adminclient.Problem
	Gaps           []gap
}

// sourceRow is one outbox.
type sourceRow struct {
	adminclient.SourceStatus
	Holders    []holder // the live lease holders, most shards first
	FreeShards int      // shards no live lease holds (nobody publishes them)
	Stale      bool     // the oldest pending event is older than adminclient.DefaultMaxPendingAge
}

// holder is a relay instance and how many shards it holds.
type holder struct {
	Owner  string
	Shards int
}

// consumerRow is one consumer: its status, or why there is none.
type consumerRow struct {
	Name   string
	Status *adminclient.ConsumerStatus
	Gap    string
}

func (s *Server) overviewView(c echo.Context) overviewView {
	ctx, cancel := s.callContext(c)
	defer cancel()
	ov := s.client.Overview(ctx, adminclient.OverviewOptions{})
	v := overviewView{CheckedAt: ov.CheckedAt, RefreshSeconds: int(s.refresh / time.Second), Problems: ov.Problems}
	gapBy := map[string]adminclient.Gap{}
	for _, g := range ov.Gaps {
		gapBy[g.Service] = g
		if g.Service == topology.Relay {
			v.Gaps = append(v.Gaps, gap{Service: g.Service, What: g.What, Error: describe(g.Err)})
		}
	}
	if ov.Relay != nil {
		v.RelayOwner = ov.Relay.Owner
		for _, src := range ov.Relay.Sources {
			v.Sources = append(v.Sources, sourceRowOf(src))
		}
	}
	statusBy := map[string]adminclient.ConsumerStatus{}
	for _, st := range ov.Consumers {
		statusBy[st.Consumer] = st
	}
	for _, svc := range topology.Consumers() {
		row := consumerRow{Name: svc.Name}
		if st, ok := statusBy[svc.Name]; ok {
			row.Status = &st
		} else if g, ok := gapBy[svc.Name]; ok {
			row.Gap = describe(g.Err)
		} else {
			row.Gap = "no status"
		}
		v.Consumers = append(v.Consumers, row)
	}
	return v
}

func sourceRowOf(src adminclient.SourceStatus) sourceRow {
	row := sourceRow{SourceStatus: src, Stale: src.Pending > 0 && src.OldestPendingAge() > adminclient.DefaultMaxPendingAge}
	count := map[string]int{}
	for _, sh := range src.Shards {
		if sh.Live && sh.Owner != "" {
			count[sh.Owner]++
		} else {
			row.FreeShards++
		}
	}
	for owner, n := range count {
		row.Holders = append(row.Holders, holder{Owner: owner, Shards: n})
	}
	sort.Slice(row.Holders, func(i, j int) bool {
		if row.Holders[i].Shards != row.Holders[j].Shards {
			return row.Holders[i].Shards > row.Holders[j].Shards
		}
		return row.Holders[i].Owner < row.Holders[j].Owner
	})
	return row
}

// overview is GET /: the tables, which the page's script replaces every RefreshSeconds with
// GET /api/overview.
func (s *Server) overview(c echo.Context) error {
	return s.render(c, http.StatusOK, "overview", s.overviewView(c))
}

// overviewFragment is GET /api/overview: the overview's tables alone.
func (s *Server) overviewFragment(c echo.Context) error {
	return s.renderFragment(c, "overview", fragmentOverview, s.overviewView(c))
}
