package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spanmart/spanmart/e2e/harness"
)

// customerOrder is the public API's view of an order (GET /v1/orders/{id}, and the answers of
// POST /v1/orders and its cancel), the part the journeys read.
type customerOrder struct {
	ID           string  `json:"id"`
	Status       string  `json:"status"`
	CancelReason *string `json:"cancel_reason"`
	Payment      struct {
		Method       string    `json:"method"`
		Instructions *struct{} `json:"instructions"`
	} `json:"payment"`
	AttentionReason string `json:"attention_reason"`
	// Timeline is the events of the order, with their commit times.
	Timeline []struct {
		EventType string    `json:"event_type"`
		At        time.Time `json:"at"`
	} `json:"timeline"`
}

// reached reports whether the order's timeline has an event of the type.
func (o customerOrder) reached(eventType string) bool {
	for _, e := range o.Timeline {
		if e.EventType == eventType {
			return true
		}
	}
	return false
}

// state is the order's status with its reason, as the checker compares them: "COMPLETED",
// "CANCELLED payment_declined", "NEEDS_ATTENTION stock_release_failed_already_shipped".
func (o customerOrder) state() string {
	switch {
	case o.CancelReason != nil && *o.CancelReason != "" && o.Status != "NEEDS_ATTENTION":
		return o.Status + " " + *o.CancelReason
	case o.AttentionReason != "":
		return o.Status + " " + o.AttentionReason
	}
	return o.Status
}

// customerDo is the one way the soak talks to the public orders API, as the customer customerID
// signed in: placing, reading and cancelling orders all go through it, with the customer's ID token
// (from the stack's identity provider, kept per customer as a client SDK keeps it).
func customerDo(ctx context.Context, s *harness.Stack, customerID, method, path string, body any, headers ...string) (*harness.Response, error) {
	token, err := s.CustomerToken(ctx, customerID)
	if err != nil {
		return nil, err
	}
	return s.Do(ctx, method, "orders", path, body, append(headers, "Authorization", "Bearer "+token)...)
}

// errGaveUp is a customer call that got no usable answer before its deadline.
var errGaveUp = errors.New("no answer")

// errShed is a customer call whose last answers until its deadline were the service shedding
// load (503 with Retry-After: admission control, docs/capacity.md "Overload"). Unless it also
// wraps errUnanswered, no attempt went unanswered: the service never took the request on.
var errShed = errors.New("refused as overloaded")

// errUnanswered marks a call of which an attempt got no answer after it may have reached the
// service (a broken connection, not a refused one): the service may have taken it on.
var errUnanswered = errors.New("an attempt went unanswered")

// customerCall sends a customer request until it gets an answer that is not a transport error or a
// 5xx (orders being killed and restarted is part of the soak: a client retries with the same
// Idempotency-Key, which is what the key is for), for at most wait. It returns the last answer.
// A 503 with Retry-After is the service refusing work past its capacity: the customer waits what
// it asks, doubling with each refusal in a row (at most 32 times it) with jitter, as a client
// should, so that customers turned away do not come back as a storm; any other failure is retried
// after 250 ms.
func customerCall(ctx context.Context, s *harness.Stack, wait time.Duration, customerID, method, path string, body any, headers ...string) (*harness.Response, error) {
	deadline := time.Now().Add(wait)
	var last string
	sheds, unanswered := 0, false
	for {
		r, err := customerDo(ctx, s, customerID, method, path, body, headers...)
		pause := 250 * time.Millisecond
		switch {
		case err == nil && r.Status < 500:
			return r, nil
		case err == nil && shed(r):
			sheds++
			last = r.String()
			pause = backoff(shedRetryAfter(r), sheds)
		case err == nil:
			sheds = 0
			last = r.String()
		default:
			// A refused connection never reached the service (orders killed): like a refusal it
			// took nothing on, so a run of refusals goes on. Any other failure may have come
			// after the service took the request on.
			if !errors.Is(err, syscall.ECONNREFUSED) {
				sheds, unanswered = 0, true
			}
			last = err.Error()
		}
		if time.Now().Add(pause).After(deadline) {
			switch {
			case sheds > 0 && unanswered:
				return nil, fmt.Errorf("%s %s: %w %d times in a row within %s; %w", method, path, errShed, sheds, wait, errUnanswered)
			case sheds > 0:
				return nil, fmt.Errorf("%s %s: %w %d times in a row within %s", method, path, errShed, sheds, wait)
			}
			return nil, fmt.Errorf("%s %s: %w within %s (last: %s)", method, path, errGaveUp, wait, last)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// shed tells a refusal of admission control (503 with Retry-After) from a service failing (a 503
// without it, a 500).
func shed(r *harness.Response) bool {
	return r.Status == http.StatusServiceUnavailable && r.Header.Get("Retry-After") != ""
}

// shedRetryAfter is a refusal's Retry-After (whole seconds; at least one).
func shedRetryAfter(r *harness.Response) time.Duration {
	n, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || n < 1 {
		n = 1
	}
	return time.Duration(n) * time.Second
}

// backoff is the pause after the n-th refusal in a row: after doubled n-1 times (at most 5), then
// between 80 % and 120 % of that.
func backoff(after time.Duration, n int) time.Duration {
	d := after << min(n-1, 5)
	return d*8/10 + rand.N(d*4/10+1)
}

// placeOrder places an order (POST /v1/orders with the order's Idempotency-Key) and returns its id.
func placeOrder(ctx context.Context, s *harness.Stack, o *Order, body map[string]any) (string, error) {
	r, err := customerCall(ctx, s, 2*time.Minute, o.Customer, http.MethodPost, "/v1/orders", body, "Idempotency-Key", o.Key)
	if err != nil {
		return "", err
	}
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		return "", fmt.Errorf("POST /v1/orders: %s", r)
	}
	var got customerOrder
	if err := r.JSON(&got); err != nil {
		return "", err
	}
	if got.ID == "" {
		return "", fmt.Errorf("POST /v1/orders: no id in %s", r)
	}
	return strings.ToLower(got.ID), nil
}

// readOrder reads an order as its customer (GET /v1/orders/{id}).
func readOrder(ctx context.Context, s *harness.Stack, o *Order) (customerOrder, error) {
	var got customerOrder
	r, err := customerCall(ctx, s, time.Minute, o.Customer, http.MethodGet, "/v1/orders/"+o.ID, nil)
	if err != nil {
		return got, err
	}
	if r.Status != http.StatusOK {
		return got, fmt.Errorf("GET /v1/orders/%s: %s", o.ID, r)
	}
	return got, r.JSON(&got)
}

// cancelOrder is the customer's POST /v1/orders/{id}/cancel (one Idempotency-Key per journey,
// reused by the retries). It returns the HTTP status and, for a 2xx, the order as the answer
// shows it.
func cancelOrder(ctx context.Context, s *harness.Stack, o *Order) (int, customerOrder, error) {
	var got customerOrder
	r, err := customerCall(ctx, s, 2*time.Minute, o.Customer, http.MethodPost, "/v1/orders/"+o.ID+"/cancel", nil, "Idempotency-Key", o.Key+"-cancel")
	if err != nil {
		return 0, got, err
	}
	if r.Status/100 == 2 {
		err = r.JSON(&got)
	}
	return r.Status, got, err
}
