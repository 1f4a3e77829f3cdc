package paysim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// requestInfo identifies the API request that caused an event (Event.request).
type requestInfo struct {
	requestID, idemKey string
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
	s.komojuRoutes(mux)
	s.adminRoutes(mux)
	return mux
}

// api wraps a Stripe endpoint with what every Stripe endpoint does: authentication, parameter
// parsing, the Request-Id and Stripe-Version headers and the error JSON; serve does the rest
// (idempotency, faults, events).
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
			writeReply(w, aerr.reply())
			return
		}
		if r.Pattern == "/v1/" {
			e := invalidRequest(http.StatusNotFound, "", "", fmt.Sprintf("Unrecognized request URL (%s: %s). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.", r.Method, r.URL.Path))
			writeReply(w, e.reply())
			return
		}
		if err := r.ParseForm(); err != nil {
			writeReply(w, invalidRequest(http.StatusBadRequest, "", "", "Invalid request body: "+err.Error()).reply())
			return
		}
		key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
		if r.Method != http.MethodPost {
			key = "" // GET is idempotent by nature; Stripe ignores the header there
		}
		if len(key) > 255 {
			writeReply(w, invalidRequest(http.StatusBadRequest, "", "", "Idempotency keys can only be up to 255 characters long.").reply())
			return
		}
		if key != "" {
			w.Header().Set("Idempotency-Key", key)
		}
		params := r.PostForm.Encode()
		if r.Method == http.MethodGet {
			params = r.Form.Encode()
		}
		s.serve(w, r, call{
			dialect: &stripeDialect, apiKey: apiKey, idemKey: key, endpoint: r.Method + " " + r.URL.Path,
			params: params, requestID: reqID,
			run: func() reply {
				result, herr := h(&request{form: r.Form, id: r.PathValue("id")})
				if herr != nil {
					return herr.reply()
				}
				return reply{status: http.StatusOK, body: mustJSON(result), save: true}
			},
		})
	})
}

// stripeDialect is how Stripe answers what the shared machinery does: idempotency errors, the
// Idempotent-Replayed and Original-Request headers of a replay, and api_error.
var stripeDialect = dialect{
	name: DialectStripe,
	mismatch: func(c *call, rec *idemRecord) reply {
		msg := fmt.Sprintf("Keys for idempotent requests can only be used with the same parameters they were first used with. "+
			"Try using a key other than '%s' if you meant to execute a different request.", c.idemKey)
		if rec.endpoint != c.endpoint {
			msg = fmt.Sprintf("Keys for idempotent requests can only be used for the same endpoint they were first used for ('%s' vs '%s'). "+
				"Try using a key other than '%s' if you meant to execute a different request.", rec.endpoint, c.endpoint, c.idemKey)
		}
		return (&apiError{status: http.StatusBadRequest, Type: errIdempotency, Message: msg}).reply()
	},
	replayed: func(h http.Header, rec *idemRecord) {
		h.Set("Idempotent-Replayed", "true")
		h.Set("Original-Request", rec.requestID)
	},
	unavailable: func(cause string) reply {
		return (&apiError{status: http.StatusInternalServerError, Type: errAPI,
			Message: "An unknown error occurred (" + cause + ")."}).reply()
	},
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
