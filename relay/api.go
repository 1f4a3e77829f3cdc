package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/outboxlib/outboxapi"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
	"github.com/spanmart/spanmart/pkg/platform"
)

// registerAPI adds the relay's own endpoints. Each takes a Google ID token for the relay's URL:
// POST /nudge the services' own accounts' (an outboxlib.Guard of NUDGE_ALLOWED_EMAILS, refusing in
// a service's words: nudgeRefusals), every other one an operator's
// (outboxlib.Operators: ADMIN_ALLOWED_EMAILS, and a delegate acting for one); anything else is a
// 401 or 403 problem and changes nothing. A replay records who did it (the verified identity).
// The bodies are pkg/outboxlib/outboxapi's types and the paths its Path constants, which the
// operators' client (internal/adminclient) decodes and calls.
//
//	POST /nudge[?source=S&shard=N[&shard=M...]]       204: make shards due a scan (services call it after
//	                                                  commits, naming their source and the events' shards);
//	                                                  a flood costs one wake-up: a woken loop is not woken again
//	GET  /v1/outbox                                   200: Status of every source
//	GET  /v1/outbox/quarantined                       200: every source's quarantined rows, with payloads
//	GET  /v1/outbox/events?aggregate_type=T&aggregate_id=ID
//	                                                  200: one aggregate's rows in every source (a trace)
//	POST /v1/outbox/{source}/events/{id}/replay       202: re-queue an event, body {"reason": "..."}
//	GET  /v1/ledger[?all=true]                        200: every source's missing deliveries
//	POST /v1/ledger/audit                             200: run an audit pass of every source now
//	                                                  (what the relay does every RELAY_LEDGER_INTERVAL;
//	                                                  Cloud Scheduler may call it too)
//	POST /v1/ledger/{source}/events/{id}/replay       202: replay a missing delivery, body {"reason": "..."}
func registerAPI(srv *platform.Server, core *relay.Relay, operators *outboxlib.Operators, nudgers outboxlib.Guard) {
	e := srv.Echo
	e.POST(outboxapi.PathNudge, func(c echo.Context) error {
		source, shardParams := c.QueryParam("source"), c.QueryParams()["shard"]
		if source == "" && len(shardParams) == 0 {
			core.Nudge()
			return c.NoContent(http.StatusNoContent)
		}
		shards, bad := make([]int64, 0, len(shardParams)), ""
		for _, p := range shardParams {
			shard, err := strconv.ParseInt(p, 10, 64)
			if err != nil || shard < 0 || shard >= outboxlib.Shards {
				bad = p
				break
			}
			shards = append(shards, shard)
		}
		if source == "" || len(shards) == 0 || bad != "" || !core.NudgeShards(source, shards...) {
			if bad == "" && len(shardParams) > 0 {
				bad = shardParams[0]
			}
			return platform.NewProblem(http.StatusBadRequest, fmt.Sprintf(
				"nudge needs both source (a configured source) and one or more shard parameters (each 0 to %d), or neither; got source %q, shard %q",
				outboxlib.Shards-1, source, bad))
		}
		return c.NoContent(http.StatusNoContent)
	}, nudgers.Middleware, platform.Quiet)
	// Everything under /v1 is behind the operators' guard, unknown paths included (the group's
	// catch-all route): a caller without an operator's token learns nothing of the routes.
	v1 := e.Group("/v1", operators.Middleware)
	under := func(path string) string { return strings.TrimPrefix(path, "/v1") } // outboxapi's paths, in v1
	v1.GET(under(outboxapi.PathOutbox), func(c echo.Context) error {
		st, err := core.Status(c.Request().Context())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, outboxapi.OutboxStatus{Owner: core.Owner(), Sources: st})
	})
	v1.GET(under(outboxapi.PathQuarantined), func(c echo.Context) error {
		evs, err := core.Quarantined(c.Request().Context())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, outboxapi.EventList{Events: nonNil(evs)})
	})
	v1.GET(under(outboxapi.PathOutboxEvents), func(c echo.Context) error {
		typ, id := c.QueryParam("aggregate_type"), c.QueryParam("aggregate_id")
		if typ == "" || id == "" {
			return platform.NewProblem(http.StatusBadRequest, "aggregate_type and aggregate_id are required")
		}
		evs, err := core.EventsOf(c.Request().Context(), typ, id)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, outboxapi.EventList{Events: nonNil(evs)})
	})
	v1.POST(under(outboxapi.PathOutbox)+"/:source/events/:id/replay", func(c echo.Context) error {
		return serveReplay(c, core.Replay)
	})
	v1.GET(under(outboxapi.PathLedger), func(c echo.Context) error {
		all, _ := strconv.ParseBool(c.QueryParam("all"))
		out := outboxapi.LedgerList{Sources: []outboxapi.LedgerSource{}}
		for _, st := range core.SourceNames() {
			missing, err := core.Missing(c.Request().Context(), st, all, 0)
			if err != nil {
				return err
			}
			out.Sources = append(out.Sources, outboxapi.LedgerSource{Source: st, Missing: missing})
		}
		return c.JSON(http.StatusOK, out)
	})
	v1.POST(under(outboxapi.PathLedgerAudit), func(c echo.Context) error {
		res, err := core.Audit(c.Request().Context())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, outboxapi.AuditList{Audits: res})
	})
	v1.POST(under(outboxapi.PathLedger)+"/:source/events/:id/replay", func(c echo.Context) error {
		return serveReplay(c, core.ReplayMissing)
	})
}

func nonNil(evs []outboxapi.Event) []outboxapi.Event {
	if evs == nil {
		return []outboxapi.Event{}
	}
	return evs
}

// serveReplay reads an outboxapi.ReplayRequest and calls replay(source, id, reason): 202 with an
// outboxapi.Replay, or a problem.
func serveReplay(c echo.Context, replay func(ctx context.Context, source, id, reason string) error) error {
	var body outboxapi.ReplayRequest
	data, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return platform.NewProblem(http.StatusBadRequest, "body must be JSON: {\"reason\": \"...\"}").Wrap(err)
	}
	source, id := c.Param("source"), c.Param("id")
	err = replay(c.Request().Context(), source, id, body.Reason)
	switch {
	case errors.Is(err, relay.ErrNoReason):
		return platform.NewProblem(http.StatusBadRequest, "reason is required").Wrap(err)
	case errors.Is(err, relay.ErrUnknownSource):
		return platform.NewProblem(http.StatusNotFound, "unknown source "+source).Wrap(err)
	case errors.Is(err, relay.ErrEventNotFound):
		return platform.NewProblem(http.StatusNotFound, "no event "+id+" in "+source).Wrap(err)
	case errors.Is(err, relay.ErrNotMissing):
		return platform.NewProblem(http.StatusConflict, "event "+id+" in "+source+" has no unreplayed missing delivery").Wrap(err)
	case err != nil:
		return err
	}
	return c.JSON(http.StatusAccepted, outboxapi.Replay{Source: source, EventID: id, Status: outboxapi.StatusReplayed})
}

// nudgeRefusals are the nudge's refusals, in the words of its callers: the services.
var nudgeRefusals = outboxlib.Refusals{Log: "nudge refused",
	NotAllowed:      "the caller is not a service allowed to nudge the relay",
	Unauthenticated: "a valid Google ID token of a service's account is required",
	Unconfigured:    "no accounts are allowed to nudge the relay", Env: "NUDGE_ALLOWED_EMAILS"}
