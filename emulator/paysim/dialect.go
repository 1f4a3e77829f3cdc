package paysim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// The dialects: the provider APIs the sandbox speaks on its one listener, Stripe's under /v1/
// and KOMOJU's under /api/v1/. They share the virtual clock, the idempotency store, the API
// faults and the webhook delivery machinery; each brings its own authentication, parameters,
// objects and error objects.
const (
	DialectStripe = "stripe"
	DialectKomoju = "komoju"
)

// idempotencyKeyLifetime is how long a provider keeps an idempotency key: Stripe "at least 24
// hours", KOMOJU "up to 24 hours from first use".
const idempotencyKeyLifetime = 24 * time.Hour

// idemKey scopes an idempotency key to the dialect and the secret key that used it, as both
// providers scope keys to an account. account is a digest of the secret key (accountOf), so
// that a snapshot in DataDir holds no key.
type idemKey struct {
	dialect, account, key string
}

// accountOf names the account of a secret key in idempotency scopes.
func accountOf(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:16])
}

// idemRecord is the saved outcome of the first request made with an idempotency key.
type idemRecord struct {
	endpoint  string // "POST /v1/payment_intents"
	params    string // canonical form of the parameters
	status    int
	body      []byte
	requestID string
	created   time.Time
	saved     memo[struct{}] // its snapshot record (persist.go)
}

// reply is an API response before it is written.
type reply struct {
	status int
	body   []byte
	header http.Header // set on top of what the dialect's wrapper set
	// save marks a reply an idempotent retry gets again. Errors found before the endpoint
	// started executing are not saved (as Stripe documents), so a corrected retry runs.
	save bool
}

// dialect is what the shared request machinery needs to know of one provider API.
type dialect struct {
	name string
	// mismatch is the dialect's answer to an idempotency key reused by another request.
	mismatch func(c *call, rec *idemRecord) reply
	// replayed marks the response of a replay, for dialects that say so in headers.
	replayed func(h http.Header, rec *idemRecord)
	// unavailable is the dialect's 500 answer, for the error fault and for a change that could
	// not be saved in DataDir; cause says which.
	unavailable func(cause string) reply
}

// call is one authenticated and parsed API request as a dialect's wrapper hands it to serve.
type call struct {
	dialect   *dialect
	apiKey    string
	idemKey   string // "" when the request carries none
	endpoint  string // method and path
	params    string // canonical parameters; a replay needs the same endpoint and parameters
	requestID string
	run       func() reply // the endpoint; runs under s.mu
}

// serve runs c the way every API request runs, whatever its dialect: an error fault answers
// without executing; otherwise, under s.mu (so requests are serialized and a retry always
// finds the first request's result), what the clock made due is applied, a retry is answered
// from the idempotency store or the endpoint runs and its reply is saved; the events it
// created are handed to the webhooks once the lock is released; a timeout fault then holds
// the response back. With a DataDir, a request that changed anything is answered only once the
// state is written, so an acknowledged change survives a crash; when the write fails the
// answer is the dialect's 500 (the change stands in memory, as a provider that acted and then
// failed to answer).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, c call) {
	fault := s.faults.take(c.dialect.name)
	if fault.Mode == FaultError {
		s.opts.Logf("paysim: %s %s -> 500 (API fault, not executed)", r.Method, r.URL.Path)
		writeReply(w, c.dialect.unavailable("the sandbox's API fault"))
		return
	}

	s.mu.Lock()
	s.tickLocked()
	k := idemKey{c.dialect.name, accountOf(c.apiKey), c.idemKey}
	var rep reply
	if rec, ok := s.idem[k]; ok && c.idemKey != "" {
		rep = replay(&c, rec)
	} else {
		s.cur = requestInfo{requestID: c.requestID, idemKey: c.idemKey}
		rep = c.run()
		s.cur = requestInfo{}
		// Only GETs and the errors found before an endpoint acted (rep.save false) change
		// nothing; the clock's changes were marked by tickLocked.
		if r.Method == http.MethodPost && rep.save {
			s.dirty = true
		}
		if c.idemKey != "" && rep.save {
			s.idem[k] = &idemRecord{endpoint: c.endpoint, params: c.params, status: rep.status,
				body: rep.body, requestID: c.requestID, created: s.nowLocked()}
			s.watchIdemLocked(k, s.idem[k])
		}
	}
	if err := s.saveLocked(); err != nil {
		s.opts.Logf("paysim: %s %s: %v", r.Method, r.URL.Path, err)
		rep = c.dialect.unavailable(err.Error())
	}
	msgs := s.takeFreshLocked()
	s.mu.Unlock()

	s.opts.Logf("paysim: %s %s -> %d (%s)", r.Method, r.URL.Path, rep.status, c.requestID)
	s.webhooks.send(msgs)
	if fault.Mode == FaultTimeout {
		s.hold(r.Context(), fault.Delay)
	}
	writeReply(w, rep)
}

// replay answers a request whose idempotency key was seen before: the saved response when
// the endpoint and parameters are the same, the dialect's error otherwise.
func replay(c *call, rec *idemRecord) reply {
	if rec.endpoint != c.endpoint || rec.params != c.params {
		return c.dialect.mismatch(c, rec)
	}
	rep := reply{status: rec.status, body: rec.body, header: http.Header{}}
	if c.dialect.replayed != nil {
		c.dialect.replayed(rep.header, rec)
	}
	return rep
}

// hold waits d, or less when the client gives up or the server closes.
func (s *Server) hold(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.closing:
	}
}

func writeReply(w http.ResponseWriter, rep reply) {
	for name, vs := range rep.header {
		w.Header()[name] = vs
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	w.Write(rep.body)
}

// API fault modes (FaultNone turns faults off).
const (
	// FaultError answers with a 500 in the dialect's error shape without executing the request.
	FaultError = "error"
	// FaultTimeout executes the request, then holds the response for Delay: a client with a
	// shorter timeout gives up although the provider acted, which is what idempotency keys
	// are for.
	FaultTimeout = "timeout"
)

// APIFault selects a fault for the next Count API requests (0: until changed) of one dialect
// ("" for both).
type APIFault struct {
	Mode    string        `json:"mode"`
	Count   int           `json:"count,omitempty"`
	Delay   time.Duration `json:"delay,omitempty"`
	Dialect string        `json:"dialect,omitempty"`
}

// apiFaults is the current API fault and how many requests it still applies to.
type apiFaults struct {
	mu    sync.Mutex
	fault APIFault
	left  int
}

func (f *apiFaults) set(x APIFault) error {
	x, err := checkFault("API", x, FaultTimeout, FaultNone, FaultError, FaultTimeout)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault, f.left = x, x.Count
	return nil
}

func (f *apiFaults) current() APIFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fault
}

// take returns the fault for one request of dialect and counts it down.
func (f *apiFaults) take(dialect string) APIFault {
	f.mu.Lock()
	defer f.mu.Unlock()
	x := f.fault
	if x.Mode == FaultNone || !appliesTo(x.Dialect, dialect) {
		return APIFault{Mode: FaultNone}
	}
	if x.Count > 0 {
		if f.left--; f.left <= 0 {
			f.fault = APIFault{Mode: FaultNone}
		}
	}
	return x
}

// checkFault validates a fault of kind ("API", "webhook"; WebhookFault converts to APIFault):
// its mode is one of modes ("" is FaultNone), delayMode needs a positive delay, the count is not
// negative and the dialect is one the sandbox speaks ("" for both). It returns f with its mode
// set.
func checkFault(kind string, f APIFault, delayMode string, modes ...string) (APIFault, error) {
	if f.Mode == "" {
		f.Mode = FaultNone
	}
	switch {
	case !slices.Contains(modes, f.Mode):
		return f, fmt.Errorf("unknown %s fault %q (want %s)", kind, f.Mode, strings.Join(modes, ", "))
	case f.Mode == delayMode && f.Delay <= 0:
		return f, fmt.Errorf("%s fault %s needs a positive delay", kind, f.Mode)
	case f.Count < 0:
		return f, fmt.Errorf("%s fault count %d is negative", kind, f.Count)
	case f.Dialect != "" && f.Dialect != DialectStripe && f.Dialect != DialectKomoju:
		return f, fmt.Errorf("unknown dialect %q (want stripe, komoju or none for both)", f.Dialect)
	}
	return f, nil
}

// appliesTo reports whether a fault scoped to filter ("" for all) applies to dialect.
func appliesTo(filter, dialect string) bool { return filter == "" || filter == dialect }
