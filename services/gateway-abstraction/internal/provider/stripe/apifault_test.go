package stripe_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spanmart/spanmart/emulator/paysim"
	"github.com/spanmart/spanmart/services/gateway-abstraction/internal/payment"
)

// The sandbox's own API faults (TestUnavailable and TestTimeoutThenRetry cover what they do
// not: other statuses, non-JSON bodies, refused connections, context deadlines). An error fault
// answers 500 without acting; a timeout fault acts and holds the answer past the client's
// timeout. Either way the retry with the same key leaves one PaymentIntent.
func TestSandboxAPIFaults(t *testing.T) {
	for _, tc := range []struct {
		fault      paysim.APIFault
		wantStatus int
		acted      bool
	}{
		{paysim.APIFault{Mode: paysim.FaultError, Count: 1, Dialect: paysim.DialectStripe}, 500, false},
		{paysim.APIFault{Mode: paysim.FaultTimeout, Count: 1, Delay: 10 * time.Second, Dialect: paysim.DialectStripe}, 0, true},
	} {
		t.Run(tc.fault.Mode, func(t *testing.T) {
			p := newProvider(t, sandbox.URL(), &http.Client{Timeout: 300 * time.Millisecond})
			if err := sandbox.SetAPIFault(tc.fault); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sandbox.SetAPIFault(paysim.APIFault{Mode: paysim.FaultNone}) })
			r := cardRequest("pm_card_visa")
			o, err := p.Authorize(context.Background(), r)
			pe := providerError(t, err)
			if !pe.Temporary || pe.Reason != payment.ReasonProviderUnavailable || pe.Status != tc.wantStatus {
				t.Errorf("Authorize = %+v, %v; want temporary, provider_unavailable, http %d", o, err, tc.wantStatus)
			}
			if ne := net.Error(nil); tc.wantStatus == 0 && (!errors.As(err, &ne) || !ne.Timeout()) {
				t.Errorf("%v is not a timeout", err)
			}
			var first string
			if pis := intentsOf(t, sandbox, r.PaymentID); tc.acted != (len(pis) == 1) || len(pis) > 1 {
				t.Fatalf("the sandbox holds %+v after the fault; acted = %t", pis, tc.acted)
			} else if tc.acted {
				first = pis[0].ID
			}

			again, err := p.Authorize(context.Background(), r)
			if err != nil || again.Status != payment.Authorized {
				t.Fatalf("retry with the same key = %+v, %v; want AUTHORIZED", again, err)
			}
			if pi := onlyIntent(t, sandbox, r.PaymentID); pi.ID != again.ProviderPaymentID || (tc.acted && pi.ID != first) {
				t.Errorf("retry answered %s; the sandbox holds %s, the faulted request made %q", again.ProviderPaymentID, pi.ID, first)
			}
		})
	}
}
