package spanneremu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"strings"
	"sync"
	"time"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// session is one Spanner session. A multiplexed session carries any number of concurrent
// transactions; a regular one is used by one at a time, which the client, not the server,
// ensures.
type session struct {
	name        string
	database    string
	multiplexed bool
	created     time.Time
	labels      map[string]string
	creatorRole string

	mu      sync.Mutex
	lastUse time.Time
}

func (ss *session) touch() {
	ss.mu.Lock()
	ss.lastUse = time.Now()
	ss.mu.Unlock()
}

func (ss *session) idleSince() time.Time {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.lastUse
}

func (ss *session) proto() *sppb.Session {
	return &sppb.Session{
		Name:                   ss.name,
		Labels:                 ss.labels,
		CreateTime:             timestamppb.New(ss.created),
		ApproximateLastUseTime: timestamppb.New(ss.idleSince()),
		CreatorRole:            ss.creatorRole,
		Multiplexed:            ss.multiplexed,
	}
}

// Spanner deletes regular sessions idle for an hour. The emulator does the same, lazily and
// only once many sessions exist, so a client that leaks sessions cannot grow memory forever.
// Multiplexed sessions are never expired: the client keeps one per database for days.
const (
	sessionIdleLimit    = time.Hour
	sessionSweepTrigger = 10000
)

// sessionStore holds the sessions of every database.
type sessionStore struct {
	mu       sync.Mutex
	sessions map[string]*session
}

func newSessionStore() *sessionStore {
	return &sessionStore{sessions: map[string]*session{}}
}

func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (st *sessionStore) create(database string, tmpl *sppb.Session) *session {
	now := time.Now()
	ss := &session{
		name:        database + "/sessions/" + newSessionID(),
		database:    database,
		multiplexed: tmpl.GetMultiplexed(),
		created:     now,
		labels:      tmpl.GetLabels(),
		creatorRole: tmpl.GetCreatorRole(),
		lastUse:     now,
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.sessions) >= sessionSweepTrigger {
		for name, old := range st.sessions {
			if !old.multiplexed && now.Sub(old.idleSince()) > sessionIdleLimit {
				delete(st.sessions, name)
			}
		}
	}
	st.sessions[ss.name] = ss
	return ss
}

func (st *sessionStore) get(name string) (*session, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ss, ok := st.sessions[name]
	if !ok {
		return nil, sessionNotFound(name)
	}
	return ss, nil
}

func (st *sessionStore) delete(name string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.sessions[name]; !ok {
		return sessionNotFound(name)
	}
	delete(st.sessions, name)
	return nil
}

// dropUnder forgets every session whose name starts with prefix (a dropped database's or
// instance's).
func (st *sessionStore) dropUnder(prefix string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for name := range st.sessions {
		if strings.HasPrefix(name, prefix) {
			delete(st.sessions, name)
		}
	}
}

// list returns the sessions of a database, sorted by name.
func (st *sessionStore) list(database string) []*session {
	st.mu.Lock()
	var out []*session
	for _, ss := range st.sessions {
		if ss.database == database {
			out = append(out, ss)
		}
	}
	st.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// maxBatchSessions is the most sessions one BatchCreateSessions returns; Spanner may return
// fewer than asked and the client asks again for the rest.
const maxBatchSessions = 100

func (sp *spannerService) CreateSession(_ context.Context, req *sppb.CreateSessionRequest) (*sppb.Session, error) {
	if err := sp.checkDatabase(req.GetDatabase()); err != nil {
		return nil, err
	}
	return sp.s.sessions.create(req.GetDatabase(), req.GetSession()).proto(), nil
}

func (sp *spannerService) BatchCreateSessions(_ context.Context, req *sppb.BatchCreateSessionsRequest) (*sppb.BatchCreateSessionsResponse, error) {
	if err := sp.checkDatabase(req.GetDatabase()); err != nil {
		return nil, err
	}
	if req.GetSessionCount() <= 0 {
		return nil, errorf(codes.InvalidArgument, "session_count must be positive, got %d", req.GetSessionCount())
	}
	tmpl := req.GetSessionTemplate()
	if tmpl.GetMultiplexed() {
		// A multiplexed template would hand out many sessions that each carry everything;
		// Spanner creates multiplexed sessions only through CreateSession.
		tmpl = proto.Clone(tmpl).(*sppb.Session)
		tmpl.Multiplexed = false
	}
	resp := &sppb.BatchCreateSessionsResponse{}
	for range min(req.GetSessionCount(), maxBatchSessions) {
		resp.Session = append(resp.Session, sp.s.sessions.create(req.GetDatabase(), tmpl).proto())
	}
	return resp, nil
}

func (sp *spannerService) GetSession(_ context.Context, req *sppb.GetSessionRequest) (*sppb.Session, error) {
	ss, _, err := sp.session(req.GetName())
	if err != nil {
		return nil, err
	}
	return ss.proto(), nil
}

// ListSessions ignores the label filter.
func (sp *spannerService) ListSessions(_ context.Context, req *sppb.ListSessionsRequest) (*sppb.ListSessionsResponse, error) {
	if err := sp.checkDatabase(req.GetDatabase()); err != nil {
		return nil, err
	}
	all := sp.s.sessions.list(req.GetDatabase())
	start, end, next, err := page(len(all), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	resp := &sppb.ListSessionsResponse{NextPageToken: next}
	for _, ss := range all[start:end] {
		resp.Sessions = append(resp.Sessions, ss.proto())
	}
	return resp, nil
}

func (sp *spannerService) DeleteSession(_ context.Context, req *sppb.DeleteSessionRequest) (*emptypb.Empty, error) {
	if _, err := splitSessionName(req.GetName()); err != nil {
		return nil, err
	}
	if err := sp.s.sessions.delete(req.GetName()); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}
