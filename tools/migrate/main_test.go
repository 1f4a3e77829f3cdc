package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(spannertest.Main(m, &env)) }

func TestCreateMigrateAndStatus(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, []string{"-instance", spannertest.Instance, "-create"}, &out); err != nil {
		t.Fatalf("first run: %v\n%s", err, out.String())
	}
	for _, db := range []string{"orders", "fulfillment", "payments", "notifications"} {
		if !strings.Contains(out.String(), "/databases/"+db+": up to date") {
			t.Errorf("first run output lacks %s:\n%s", db, out.String())
		}
	}
	if !strings.Contains(out.String(), "applying services/orders/schema/0001_init.sql") {
		t.Errorf("first run did not report applying the orders migration:\n%s", out.String())
	}

	out.Reset()
	if err := run(ctx, []string{"-instance", spannertest.Instance, "-databases", "orders", "-status"}, &out); err != nil {
		t.Fatal(err)
	}
	orders, err := dbschema.Lookup("orders")
	if err != nil {
		t.Fatal(err)
	}
	migs, err := orders.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("%d migrations, 0 pending", len(migs))) {
		t.Errorf("status after migrating = %q, want 0 pending", out.String())
	}

	out.Reset()
	if err := run(ctx, []string{"-instance", spannertest.Instance}, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "applying") || strings.Count(out.String(), "(0 applied now") != 4 {
		t.Errorf("second run applied something:\n%s", out.String())
	}
}

func TestMissingDatabaseNeedsCreate(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-instance", "projects/spanmart-test/instances/empty", "-databases", "orders"}, &out)
	if err == nil || !strings.Contains(err.Error(), "use -create") {
		t.Errorf("run without -create on a missing database = %v, want an error suggesting -create", err)
	}
}

func TestBadArguments(t *testing.T) {
	t.Setenv("SPANNER_INSTANCE", "")
	for name, args := range map[string][]string{
		"no instance":      {},
		"malformed":        {"-instance", "spanmart/dev"},
		"unknown database": {"-instance", spannertest.Instance, "-databases", "inventory"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(context.Background(), args, &bytes.Buffer{}); err == nil {
				t.Error("run succeeded, want an error")
			}
		})
	}
}
