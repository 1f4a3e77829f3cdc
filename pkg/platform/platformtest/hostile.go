package platformtest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spanmart/spanmart/pkg/platform"
)

// Hostile is a request that a hostile or broken client sends (wrong Content-Type, a key twice,
// invalid UTF-8, a body shorter than its Content-Length, a forged token...) and the refusal it
// must get. The services' hostile tests are tables of them, checked by Refuse; what each service
// must not have stored stays its own check, after the table.
type Hostile struct {
	Name    string
	Method  string            // "" is POST
	Path    string            // written as given: it may be anything a client can send
	Header  map[string]string // every header sent, Content-Type and Authorization included
	Body    string
	ShortBy int    // a Content-Length this much longer than Body, then the client stops sending
	Status  int    // the 4xx the server must answer
	Detail  string // what the problem's detail or errors member must say
}

// Problem is an RFC 9457 problem as a client reads it, with the errors member of validation
// problems.
type Problem struct {
	Type   string   `json:"type"`
	Title  string   `json:"title"`
	Status int      `json:"status"`
	Detail string   `json:"detail"`
	Errors []string `json:"errors"`
}

// GoTerms are words of Go, not of any API, that no problem may show a client: what encoding/json
// and reflect say of a value they could not decode, and the names of the services' request types.
var GoTerms = []string{
	"Go struct", "Go value", "int64", "string into", "map[", "json.", "json: ", "reflect",
	"PlaceOrderRequest", "LineRequest", "PaymentRequest", "ShipRequest", "FailRequest",
}

// SpeaksGo returns the first of GoTerms in text, or "".
func SpeaksGo(text string) string {
	for _, term := range GoTerms {
		if strings.Contains(text, term) {
			return term
		}
	}
	return ""
}

// RefuseAll runs Refuse on each case, as a subtest named after it.
func RefuseAll(t *testing.T, base string, cases []Hostile) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { Refuse(t, base, c) })
	}
}

// Refuse sends c to the server at base on a connection of its own (see RawPost) and checks that
// it is refused as a client must be told: status c.Status (never a 500), Content-Type
// application/problem+json, a problem of that status with a title and a detail, c.Detail in the
// detail or the errors member, and no word of GoTerms in either. It returns
// the problem.
func Refuse(t testing.TB, base string, c Hostile) Problem {
	t.Helper()
	if c.Status < 400 || c.Status > 499 {
		t.Fatalf("%s: want status %d: a refusal is a 4xx", c.Name, c.Status)
	}
	status, header, body := RawPost(t, base, RawRequest{Method: c.Method, Path: c.Path, Header: c.Header, Body: c.Body, ShortBy: c.ShortBy})
	if status != c.Status {
		t.Fatalf("%.80s: %d %s, want %d", c.Path, status, body, c.Status)
	}
	if ct := header.Get("Content-Type"); ct != platform.ContentTypeProblem {
		t.Errorf("Content-Type %q, want %s", ct, platform.ContentTypeProblem)
	}
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("the answer is not a problem: %v: %s", err, body)
	}
	text := p.Detail + " " + strings.Join(p.Errors, "; ")
	if p.Status != c.Status || p.Title == "" || p.Detail == "" || !strings.Contains(text, c.Detail) {
		t.Errorf("problem %+v, want status %d, a title and a detail mentioning %q", p, c.Status, c.Detail)
	}
	if term := SpeaksGo(text); term != "" {
		t.Errorf("problem %q speaks Go (%q)", text, term)
	}
	return p
}
