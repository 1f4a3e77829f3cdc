package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
)

// ContentTypeProblem is the media type of RFC 9457 problem details.
const ContentTypeProblem = "application/problem+json"

// Problem is an RFC 9457 problem details object. Handlers may return one as an error to choose
// the status and detail themselves; the error handler fills in Title and Instance.
type Problem struct {
	Type     string // a URI; "" is written as about:blank
	Title    string // short, the same for every occurrence of Type; default the status text
	Status   int
	Detail   string // this occurrence, safe to show the caller
	Instance string // the request path, set by the error handler
	// Extensions are extra members (RFC 9457 §3.2), e.g. "request_id" or "checks".
	Extensions map[string]any

	cause error
}

// NewProblem returns a problem with status and detail.
func NewProblem(status int, detail string) *Problem {
	return &Problem{Status: status, Detail: detail}
}

// Wrap records err as the cause (logged, never shown) and returns p.
func (p *Problem) Wrap(err error) *Problem {
	p.cause = err
	return p
}

func (p *Problem) Error() string {
	msg := fmt.Sprintf("%d %s", p.Status, p.Detail)
	if p.cause != nil {
		msg += ": " + p.cause.Error()
	}
	return msg
}

func (p *Problem) Unwrap() error { return p.cause }

// MarshalJSON writes the standard members followed by the extensions.
func (p *Problem) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(p.Extensions)+5)
	for k, v := range p.Extensions {
		m[k] = v
	}
	m["type"] = p.Type
	if p.Type == "" {
		m["type"] = "about:blank"
	}
	m["title"] = p.Title
	m["status"] = p.Status
	if p.Detail != "" {
		m["detail"] = p.Detail
	}
	if p.Instance != "" {
		m["instance"] = p.Instance
	}
	return json.Marshal(m)
}

// ErrorMapper maps domain errors to an HTTP status; ok is false for errors it does not know.
// A service's httpapi package supplies one; the domain packages stay free of HTTP.
type ErrorMapper func(err error) (status int, ok bool)

// MapErrors returns an ErrorMapper matching targets with errors.Is, e.g.
// MapErrors(map[error]int{order.ErrNotFound: 404, order.ErrIllegalTransition: 409}).
func MapErrors(m map[error]int) ErrorMapper {
	return func(err error) (int, bool) {
		for target, status := range m {
			if errors.Is(err, target) {
				return status, true
			}
		}
		return 0, false
	}
}

// StatusClientClosedRequest is nginx's code for a request whose client went away; it is only
// logged, the client never sees it.
const StatusClientClosedRequest = 499

// problemFor turns any error into a problem. 5xx details are generic: internal messages may hold
// SQL, keys or hostnames and only go to the log.
func problemFor(err error, mapper ErrorMapper) *Problem {
	var (
		p   *Problem
		he  *echo.HTTPError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &p):
		p = clone(p)
	case errors.As(err, &mbe):
		p = NewProblem(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
	case errors.As(err, &he):
		p = &Problem{Status: he.Code}
		if s, ok := he.Message.(string); ok {
			p.Detail = s
		} else if he.Message != nil {
			p.Detail = fmt.Sprint(he.Message)
		}
	default:
		if mapper != nil {
			if status, ok := mapper(err); ok {
				p = NewProblem(status, err.Error())
				break
			}
		}
		switch {
		case errors.Is(err, context.Canceled):
			p = NewProblem(StatusClientClosedRequest, "client closed request")
		case errors.Is(err, context.DeadlineExceeded):
			p = NewProblem(http.StatusServiceUnavailable, "")
		default:
			p = NewProblem(http.StatusInternalServerError, "")
		}
	}
	if p.Status < 400 || p.Status > 599 {
		p.Status = http.StatusInternalServerError
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
		if p.Status == StatusClientClosedRequest {
			p.Title = "Client Closed Request"
		}
	}
	if p.Status >= 500 && !errors.As(err, new(*Problem)) {
		p.Detail = "" // see above
	}
	return p
}

func clone(p *Problem) *Problem {
	c := *p
	return &c
}
