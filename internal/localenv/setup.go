package localenv

import (
	"context"
	"fmt"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/internal/localcloud"
	"github.com/spanmart/spanmart/internal/topology"
	"github.com/spanmart/spanmart/pkg/outboxlib/relay"
)

// Queue is the full name of a subscriber queue of a local stack.
func Queue(id string) string { return localcloud.Location + "/queues/" + id }

// CreateQueues creates every consumer's inbox queue (the roster's) with the relay's settings for
// a subscriber queue, changed by adjust when it is not nil. A queue that exists is kept as it is,
// with its tasks (a restarted dev stack). It returns the names of the queues it created.
func CreateQueues(ctx context.Context, tc *cloudtasks.Client, adjust func(*cloudtaskspb.Queue)) ([]string, error) {
	var created []string
	for _, id := range topology.Queues() {
		q := relay.SubscriberQueue(Queue(id))
		if adjust != nil {
			adjust(q)
		}
		_, err := tc.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: localcloud.Location, Queue: q})
		switch status.Code(err) {
		case codes.OK:
			created = append(created, q.Name)
		case codes.AlreadyExists:
		default:
			return created, fmt.Errorf("create queue %s: %w", q.Name, err)
		}
	}
	return created, nil
}

// Product is a product of a local stack's catalog: a Products row (orders database) and an
// Inventory row (fulfillment database).
type Product struct {
	SKU         string
	Name        string
	Description string
	PriceMinor  int64
	Currency    string
	Active      bool
	OnHand      int64
}

// SeedProducts writes the products' Products rows (insert or update).
func SeedProducts(ctx context.Context, orders *spanner.Client, products []Product) error {
	ms := make([]*spanner.Mutation, 0, len(products))
	for _, p := range products {
		row := &ordersdb.Product{
			Sku: p.SKU, Name: p.Name, PriceMinor: p.PriceMinor, Currency: p.Currency, Active: p.Active,
			Description: spanner.NullString{StringVal: p.Description, Valid: p.Description != ""},
		}
		row.SetCommitTimestamps()
		ms = append(ms, row.InsertOrUpdate())
	}
	if _, err := orders.Apply(ctx, ms); err != nil {
		return fmt.Errorf("seed Products: %w", err)
	}
	return nil
}

// SeedInventory writes the products' Inventory rows (insert or update: the stock on hand, nothing
// reserved).
func SeedInventory(ctx context.Context, fulfillment *spanner.Client, products []Product) error {
	ms := make([]*spanner.Mutation, 0, len(products))
	for _, p := range products {
		row := &fulfillmentdb.Inventory{Sku: p.SKU, OnHand: p.OnHand}
		row.SetCommitTimestamps()
		ms = append(ms, row.InsertOrUpdate())
	}
	if _, err := fulfillment.Apply(ctx, ms); err != nil {
		return fmt.Errorf("seed Inventory: %w", err)
	}
	return nil
}
