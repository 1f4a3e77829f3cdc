package outboxlib_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/pkg/outboxlib"
	"github.com/spanmart/spanmart/pkg/platform"
)

// A consumer of order.created in a service's run function. The handler only reads and buffers in
// the transaction it is given; the consumer adds the inbox row and the aggregate's version.
func ExampleConsumer() {
	var (
		client *spanner.Client  // the service's database
		srv    *platform.Server // platform.NewServer(cfg.ServerOptions(log))
	)
	if err := outboxlib.CheckRetention(7*24*time.Hour, 14*24*time.Hour); err != nil {
		log.Fatal(err) // the queues' max_retry_duration and the replay window outlive the dedup rows
	}
	verifier, err := outboxlib.NewVerifier(outboxlib.VerifierConfig{
		Issuer:        outboxlib.GoogleIssuer,
		Audiences:     []string{"https://fulfillment-xyz.a.run.app/events"},
		AllowedEmails: []string{"relay@my-project.iam.gserviceaccount.com"},
	})
	if err != nil {
		log.Fatal(err)
	}
	consumer, err := outboxlib.NewConsumer(outboxlib.ConsumerConfig{
		Name: "fulfillment", Client: client, Verifier: verifier, Registerer: srv.Registry,
	})
	if err != nil {
		log.Fatal(err)
	}
	consumer.Handle("order.created", func(ctx context.Context, txn *spanner.ReadWriteTransaction, d outboxlib.Delivery) error {
		var p struct {
			Items []struct{ SKU string }
		}
		if err := json.Unmarshal(d.Payload, &p); err != nil {
			return outboxlib.Permanent(fmt.Errorf("order.created %s: %w", d.ID, err))
		}
		// ... reserve stock with txn.BufferWrite / txn.Update, append inventory.reserved with
		// outboxlib.Append(ctx, txn, ev) ...
		return nil
	})
	consumer.Register(srv.Echo) // POST /events, POST /admin/ledger, the operators' /admin/deadletters
}
