package spanneremu

import (
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
)

// rpcCounts counts the data API's RPCs (google.spanner.v1.Spanner) by database and method, reads
// by table too ("StreamingRead(Orders)"), for Stats: what a client's work costs in round trips,
// which commits alone do not show.
type rpcCounts struct {
	m sync.Map // rpcKey → *atomic.Int64
}

type rpcKey struct{ database, method string }

const dataAPI = "/google.spanner.v1.Spanner/"

// count counts one RPC of fullMethod on the database that req names (by its session or
// database), if it is a data API request.
func (c *rpcCounts) count(fullMethod string, req any) {
	method, ok := strings.CutPrefix(fullMethod, dataAPI)
	if !ok {
		return
	}
	var name string
	switch r := req.(type) {
	case interface{ GetSession() string }:
		name = r.GetSession()
	case interface{ GetDatabase() string }:
		name = r.GetDatabase()
	}
	db := databaseID(name)
	if db == "" {
		return
	}
	if r, ok := req.(interface{ GetTable() string }); ok {
		method += "(" + r.GetTable() + ")"
	}
	k := rpcKey{db, method}
	n, ok := c.m.Load(k)
	if !ok {
		n, _ = c.m.LoadOrStore(k, new(atomic.Int64))
	}
	n.(*atomic.Int64).Add(1)
}

// byDatabase returns the counts by database id and method.
func (c *rpcCounts) byDatabase() map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	c.m.Range(func(k, v any) bool {
		key := k.(rpcKey)
		if out[key.database] == nil {
			out[key.database] = map[string]int64{}
		}
		out[key.database][key.method] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// databaseID is the database id in a database or session name
// (projects/P/instances/I/databases/D[/sessions/S]), or "".
func databaseID(name string) string {
	_, rest, ok := strings.Cut(name, "/databases/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// countingStream counts a streaming RPC when its request arrives.
type countingStream struct {
	grpc.ServerStream
	rpcs    *rpcCounts
	method  string
	counted bool
}

func (s *countingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil && !s.counted {
		s.counted = true
		s.rpcs.count(s.method, m)
	}
	return err
}
