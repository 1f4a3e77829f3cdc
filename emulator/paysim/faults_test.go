package paysim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// faultDialect is what TestAPIFaults needs of a dialect: a create request sent with net/http,
// where its read-back lists what was created, and whether a body is its 500 error object.
type faultDialect struct {
	name     string
	readBack string
	create   func(hc *http.Client, base, idemKey string) (*http.Response, error)
	is500    func(body []byte) bool
}

var faultDialects = []faultDialect{
	{
		name: DialectStripe, readBack: "/_sandbox/payment_intents",
		create: func(hc *http.Client, base, idemKey string) (*http.Response, error) {
			form := url.Values{"amount": {"100"}, "currency": {"usd"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"}}
			req, _ := http.NewRequest("POST", base+"/v1/payment_intents", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("Idempotency-Key", idemKey)
			return hc.Do(req)
		},
		is500: func(body []byte) bool {
			var e struct {
				Error struct{ Type, Message string }
			}
			return json.Unmarshal(body, &e) == nil && e.Error.Type == "api_error" && e.Error.Message != ""
		},
	},
	{
		name: DialectKomoju, readBack: "/_sandbox/komoju/payments",
		create: func(hc *http.Client, base, idemKey string) (*http.Response, error) {
			c := komojuClient{base: base, key: komojuKey, hc: hc}
			return c.send("POST", "/api/v1/payments", konbini("lawson", 100), "X-KOMOJU-IDEMPOTENCY", idemKey)
		},
		is500: func(body []byte) bool {
			var e kError
			return json.Unmarshal(body, &e) == nil && e.Error.Code == "internal_server_error" && e.Error.Message != ""
		},
	},
}

// created is the ids of what the dialect's read-back lists.
func (d faultDialect) created(t *testing.T, srv *Server) []string {
	t.Helper()
	var got struct{ Data []struct{ ID string } }
	getJSON(t, srv.URL()+d.readBack, &got)
	var ids []string
	for _, o := range got.Data {
		ids = append(ids, o.ID)
	}
	return ids
}

// createOK sends a create that must succeed and returns the id.
func (d faultDialect) createOK(t *testing.T, srv *Server, key string) string {
	t.Helper()
	resp, err := d.create(http.DefaultClient, srv.URL(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var o struct{ ID string }
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &o) != nil || o.ID == "" {
		t.Fatalf("%s create: status %d: %s", d.name, resp.StatusCode, body)
	}
	return o.ID
}

func (d faultDialect) other() faultDialect {
	if d.name == DialectStripe {
		return faultDialects[1]
	}
	return faultDialects[0]
}

func TestAPIFaults(t *testing.T) {
	for _, d := range faultDialects {
		t.Run(d.name+"/error", func(t *testing.T) {
			srv, _ := startSandbox(t, Options{})
			postFault(t, srv, `{"mode":"error","count":2,"dialect":"`+d.name+`"}`, http.StatusOK)
			for i := range 2 {
				resp, err := d.create(http.DefaultClient, srv.URL(), newID("k"))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusInternalServerError || !d.is500(body) {
					t.Errorf("request %d under the fault: status %d: %s", i+1, resp.StatusCode, body)
				}
				// The other dialect is not affected and does not count the fault down.
				d.other().createOK(t, srv, newID("k"))
			}
			if got := d.created(t, srv); len(got) != 0 {
				t.Errorf("requests answered by the error fault were executed: %v", got)
			}
			if diff := cmp.Diff(map[string]any{"mode": "none"}, getFault(t, srv)); diff != "" {
				t.Errorf("fault after counting down (-want +got):\n%s", diff)
			}
			d.createOK(t, srv, newID("k"))
		})

		t.Run(d.name+"/timeout", func(t *testing.T) {
			srv, _ := startSandbox(t, Options{})
			if err := srv.SetAPIFault(APIFault{Mode: FaultTimeout, Count: 1, Delay: time.Minute, Dialect: d.name}); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"mode": "timeout", "count": float64(1), "delay": "1m0s", "dialect": d.name}
			if diff := cmp.Diff(want, getFault(t, srv)); diff != "" {
				t.Errorf("GET /_sandbox/faults (-want +got):\n%s", diff)
			}
			key := newID("k")
			impatient := &http.Client{Timeout: 300 * time.Millisecond}
			if resp, err := d.create(impatient, srv.URL(), key); err == nil {
				resp.Body.Close()
				t.Fatalf("the client got an answer (%d) within its timeout", resp.StatusCode)
			}
			// The provider acted although the client gave up.
			var acted []string
			eventually(t, "the request executed", func() bool { acted = d.created(t, srv); return len(acted) == 1 })
			// The retry with the same key is answered with the first request's result.
			if id := d.createOK(t, srv, key); id != acted[0] {
				t.Errorf("retry created %s, want the first request's %s", id, acted[0])
			}
			if got := d.created(t, srv); len(got) != 1 {
				t.Errorf("after the retry: %v", got)
			}
		})
	}
}

func TestAPIFaultHoldsUntilDelay(t *testing.T) {
	srv, _ := startSandbox(t, Options{})
	if err := srv.SetAPIFault(APIFault{Mode: FaultTimeout, Delay: 150 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	faultDialects[1].createOK(t, srv, newID("k"))
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("answered after %v, before the fault's delay", waited)
	}
	// Count 0: the fault stays until changed, for both dialects.
	if got := getFault(t, srv)["mode"]; got != "timeout" {
		t.Errorf("fault %v after one request", got)
	}
	postFault(t, srv, `{"mode":"none"}`, http.StatusOK)
}

func TestAPIFaultValidation(t *testing.T) {
	srv, _ := startSandbox(t, Options{})
	for _, body := range []string{
		`{"mode":"explode"}`,
		`{"mode":"timeout"}`,
		`{"mode":"timeout","delay":"soon"}`,
		`{"mode":"error","count":-1}`,
		`{"mode":"error","dialect":"paypal"}`,
		`not json`,
	} {
		postFault(t, srv, body, http.StatusBadRequest)
	}
	if got := getFault(t, srv)["mode"]; got != FaultNone {
		t.Errorf("fault %v after invalid requests", got)
	}
	if err := srv.SetWebhookFault(WebhookFault{Mode: FaultDrop, Dialect: "paypal"}); err == nil {
		t.Error("a webhook fault for an unknown dialect was accepted")
	}
}

func postFault(t *testing.T, srv *Server, body string, want int) {
	t.Helper()
	resp, err := http.Post(srv.URL()+"/_sandbox/faults", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Errorf("POST /_sandbox/faults %s: status %d, want %d", body, resp.StatusCode, want)
	}
}

func getFault(t *testing.T, srv *Server) map[string]any {
	t.Helper()
	var got struct{ Fault map[string]any }
	getJSON(t, srv.URL()+"/_sandbox/faults", &got)
	return got.Fault
}
