package paysim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// idempotencyKeyLifetime is how long Stripe keeps an idempotency key (at least 24 hours).
const idempotencyKeyLifetime = 24 * time.Hour

// requestInfo identifies the API request that caused an event (Event.request).
type requestInfo struct {
	requestID, idemKey string
}

// idemKey scopes idempotency keys to the secret key that used them, as Stripe does per account.
type idemKey struct {
	apiKey, key string
}

// idemRecord is the saved outcome of the first request made with an idempotency key.
type idemRecord struct {
	endpoint  string // "POST /v1/payment_intents"
	params    string // canonical form encoding of the parameters
	status    int
	body      []byte
	requestID string
	created   time.Time
}

// request is what an API handler gets: the parsed parameters and the path's {id}.
type request struct {
	form url.Values
	id   string
}

type handler func(r *request) (any, *apiError)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payment_intents", s.api(s.createPaymentIntent))
	mux.Handle("GET /v1/payment_intents/{id}", s.api(s.retrievePaymentIntent))
	mux.Handle("POST /v1/payment_intents/{id}/confirm", s.api(s.confirmPaymentIntent))
	mux.Handle("POST /v1/payment_intents/{id}/capture", s.api(s.capturePaymentIntent))
	mux.Handle("POST /v1/payment_intents/{id}/cancel", s.api(s.cancelPaymentIntent))
	mux.Handle("GET /v1/charges/{id}", s.api(s.retrieveCharge))
	mux.Handle("POST /v1/refunds", s.api(s.createRefund))
	mux.Handle("GET /v1/refunds/{id}", s.api(s.retrieveRefund))
	mux.Handle("GET /v1/events/{id}", s.api(s.retrieveEvent))
	mux.Handle("GET /v1/events", s.api(s.listEvents))
	mux.Handle("/v1/", s.api(func(*request) (any, *apiError) { return nil, nil })) // unrecognized: answered in api
	s.adminRoutes(mux)
	return mux
}

// api wraps an API handler with what every Stripe endpoint does: authentication, parameter
// parsing, idempotency, the Request-Id header and the error JSON. The handler runs under s.mu,
// so requests are serialized and a retry with the same idempotency key always finds the
// first request's result.
func (s *Server) api(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqID := newID("req")
		w.Header().Set("Request-Id", reqID)
		w.Header().Set("Content-Type", "application/json")
		version := r.Header.Get("Stripe-Version")
		if version == "" {
			version = s.opts.APIVersion
		}
		w.Header().Set("Stripe-Version", version)

		apiKey, aerr := s.authenticate(r)
		if aerr != nil {
			writeJSON(w, aerr.status, map[string]any{"error": aerr})
			return
		}
		if r.Pattern == "/v1/" {
			e := invalidRequest(http.StatusNotFound, "", "", fmt.Sprintf("Unrecognized request URL (%s: %s). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.", r.Method, r.URL.Path))
			writeJSON(w, e.status, map[string]any{"error": e})
			return
		}
		if err := r.ParseForm(); err != nil {
			e := invalidRequest(http.StatusBadRequest, "", "", "Invalid request body: "+err.Error())
			writeJSON(w, e.status, map[string]any{"error": e})
			return
		}
		key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
		if r.Method != http.MethodPost {
			key = "" // GET is idempotent by nature; Stripe ignores the header there
		}
		if len(key) > 255 {
			e := invalidRequest(http.StatusBadRequest, "", "", "Idempotency keys can only be up to 255 characters long.")
			writeJSON(w, e.status, map[string]any{"error": e})
			return
		}
		endpoint := r.Method + " " + r.URL.Path
		params := r.PostForm.Encode()
		if r.Method == http.MethodGet {
			params = r.Form.Encode()
		}

		s.mu.Lock()
		s.tickLocked()
		if key != "" {
			if rec, ok := s.idem[idemKey{apiKey, key}]; ok {
				s.mu.Unlock()
				s.replay(w, rec, key, endpoint, params)
				return
			}
		}
		s.cur = requestInfo{requestID: reqID, idemKey: key}
		result, herr := h(&request{form: r.Form, id: r.PathValue("id")})
		status := http.StatusOK
		var body []byte
		if herr != nil {
			status = herr.status
			body = mustJSON(map[string]any{"error": herr})
		} else {
			body = mustJSON(result)
		}
		if key != "" && (herr == nil || !herr.validation) {
			s.idem[idemKey{apiKey, key}] = &idemRecord{endpoint: endpoint, params: params, status: status,
				body: body, requestID: reqID, created: s.nowLocked()}
		}
		s.cur = requestInfo{}
		evs := s.takeFreshLocked()
		s.mu.Unlock()

		s.opts.Logf("paysim: %s %s -> %d (%s)", r.Method, r.URL.Path, status, reqID)
		s.webhooks.send(evs, s.opts.APIVersion)
		if key != "" {
			w.Header().Set("Idempotency-Key", key)
		}
		w.WriteHeader(status)
		w.Write(body)
	})
}

// replay answers a request whose idempotency key was seen before: the saved response when the
// endpoint and parameters are the same, an idempotency_error otherwise.
func (s *Server) replay(w http.ResponseWriter, rec *idemRecord, key, endpoint, params string) {
	w.Header().Set("Idempotency-Key", key)
	if rec.endpoint != endpoint {
		e := &apiError{status: http.StatusBadRequest, Type: errIdempotency, Message: fmt.Sprintf(
			"Keys for idempotent requests can only be used for the same endpoint they were first used for ('%s' vs '%s'). Try using a key other than '%s' if you meant to execute a different request.",
			rec.endpoint, endpoint, key)}
		writeJSON(w, e.status, map[string]any{"error": e})
		return
	}
	if rec.params != params {
		e := &apiError{status: http.StatusBadRequest, Type: errIdempotency, Message: fmt.Sprintf(
			"Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '%s' if you meant to execute a different request.",
			key)}
		writeJSON(w, e.status, map[string]any{"error": e})
		return
	}
	w.Header().Set("Idempotent-Replayed", "true")
	w.Header().Set("Original-Request", rec.requestID)
	w.WriteHeader(rec.status)
	w.Write(rec.body)
}

// authenticate returns the secret key of the request (Bearer, or Basic with the key as user
// name, both of which Stripe accepts) or Stripe's 401 error.
func (s *Server) authenticate(r *http.Request) (string, *apiError) {
	h := r.Header.Get("Authorization")
	var key string
	switch {
	case strings.HasPrefix(h, "Bearer "):
		key = strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	case strings.HasPrefix(h, "Basic "):
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "Basic "))
		if err == nil {
			key, _, _ = strings.Cut(string(raw), ":")
		}
	}
	if key == "" {
		return "", &apiError{status: http.StatusUnauthorized, Type: errInvalidRequest, Message: "You did not provide an API key. " +
			"You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). " +
			"See https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/."}
	}
	if !strings.HasPrefix(key, "sk_test_") || (s.opts.APIKey != "" && key != s.opts.APIKey) {
		return "", &apiError{status: http.StatusUnauthorized, Type: errInvalidRequest, Message: "Invalid API Key provided: " + redactKey(key)}
	}
	return key, nil
}

// redactKey shows a key as Stripe's errors do: its prefix and last four characters.
func redactKey(key string) string {
	if len(key) <= 12 {
		return strings.Repeat("*", len(key))
	}
	return key[:8] + strings.Repeat("*", len(key)-12) + key[len(key)-4:]
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own JSON types are marshalled
	}
	return b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(mustJSON(v))
}

// intParam reads an optional integer parameter; ok is false when it is absent.
func intParam(form url.Values, name string) (n int64, ok bool, err *apiError) {
	v := form.Get(name)
	if v == "" {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil {
		return 0, false, invalidInteger(name, v)
	}
	return n, true, nil
}

// boolParam reads an optional boolean parameter ("true"/"false").
func boolParam(form url.Values, name string) (bool, *apiError) {
	switch v := form.Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, invalidParam(name, fmt.Sprintf("Invalid boolean: %s", v))
	}
}

// metadataParam collects metadata[key]=value parameters.
func metadataParam(form url.Values) map[string]string {
	var md map[string]string
	for k, vs := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") {
			if md == nil {
				md = map[string]string{}
			}
			md[strings.TrimSuffix(name, "]")] = vs[len(vs)-1]
		}
	}
	return md
}

// oneOf checks an optional enumerated parameter.
func oneOf(form url.Values, name string, allowed ...string) (string, *apiError) {
	v := form.Get(name)
	if v == "" {
		return "", nil
	}
	for _, a := range allowed {
		if v == a {
			return v, nil
		}
	}
	return "", invalidParam(name, fmt.Sprintf("Invalid %s: must be one of %s", name, strings.Join(allowed, ", ")))
}
