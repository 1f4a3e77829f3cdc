package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/internal/localenv"
)

// seedJSON is the catalog the dev stack loads into an empty database. It is compiled in, so the
// binary needs no files beside it.
//
//go:embed seed.json
var seedJSON []byte

// A product of seed.json: a row of Products (orders database) and one of Inventory (fulfillment).
type seedProduct struct {
	SKU         string `json:"sku"`
	Name        string `json:"name"`
	Description string `json:"description"`
	PriceMinor  int64  `json:"price_minor"`
	Currency    string `json:"currency"`
	Active      bool   `json:"active"`
	OnHand      int64  `json:"on_hand"`
}

func (p seedProduct) product() localenv.Product {
	return localenv.Product{SKU: p.SKU, Name: p.Name, Description: p.Description, PriceMinor: p.PriceMinor,
		Currency: p.Currency, Active: p.Active, OnHand: p.OnHand}
}

type seedFile struct {
	Comment  string        `json:"_comment"`
	Products []seedProduct `json:"products"`
}

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// parseSeed reads and checks the seed file, so that a mistake in it is reported by name instead of
// as a CHECK constraint violation from Spanner.
func parseSeed(data []byte) ([]seedProduct, error) {
	var f seedFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("seed.json: %w", err)
	}
	seen := map[string]bool{}
	for i, p := range f.Products {
		switch {
		case p.SKU == "" || len(p.SKU) > 64:
			return nil, fmt.Errorf("seed.json: product %d: sku must be 1 to 64 characters", i)
		case seen[p.SKU]:
			return nil, fmt.Errorf("seed.json: product %s appears twice", p.SKU)
		case p.Name == "":
			return nil, fmt.Errorf("seed.json: product %s: name is empty", p.SKU)
		case !currencyCode.MatchString(p.Currency):
			return nil, fmt.Errorf("seed.json: product %s: currency %q is not an ISO 4217 code like JPY", p.SKU, p.Currency)
		case p.PriceMinor < 0:
			return nil, fmt.Errorf("seed.json: product %s: price_minor is negative", p.SKU)
		case p.OnHand < 0:
			return nil, fmt.Errorf("seed.json: product %s: on_hand is negative", p.SKU)
		}
		seen[p.SKU] = true
	}
	return f.Products, nil
}

// seedCatalog loads seed.json into Products and Inventory, each only while its table is empty: a
// restart keeps whatever the previous runs (orders, reservations, manual edits) made of the data.
// The two tables are in different databases and are checked separately, so an emptied Inventory
// is restocked without touching the catalog.
func (st *stack) seedCatalog(ctx context.Context, orders, fulfillment *spanner.Client) error {
	seed, err := parseSeed(seedJSON)
	if err != nil {
		return err
	}
	products := make([]localenv.Product, len(seed))
	for i, p := range seed {
		products[i] = p.product()
	}
	n, err := countRows(ctx, orders, ordersdb.ProductsTable)
	if err != nil {
		return err
	}
	if n > 0 {
		st.con.say("seed: Products already has %d rows, left as they are", n)
	} else {
		if err := localenv.SeedProducts(ctx, orders, products); err != nil {
			return err
		}
		st.con.say("seed: %d products written to Products (orders database)", len(products))
	}

	n, err = countRows(ctx, fulfillment, fulfillmentdb.InventoryTable)
	if err != nil {
		return err
	}
	if n > 0 {
		st.con.say("seed: Inventory already has %d rows, left as they are", n)
		return nil
	}
	if err := localenv.SeedInventory(ctx, fulfillment, products); err != nil {
		return err
	}
	st.con.say("seed: %d stock levels written to Inventory (fulfillment database)", len(products))
	return nil
}

func countRows(ctx context.Context, client *spanner.Client, table string) (int64, error) {
	var n int64
	// table is one of our constants, never user input.
	it := client.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM " + table})
	err := it.Do(func(r *spanner.Row) error { return r.Column(0, &n) })
	if err != nil {
		return 0, fmt.Errorf("count rows of %s: %w", table, err)
	}
	return n, nil
}
