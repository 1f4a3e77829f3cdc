package main

import (
	"os"
	"testing"

	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/platform/platformtest"
	"github.com/spanmart/spanmart/pkg/spannertest"
)

var env *spannertest.Env

func TestMain(m *testing.M) { os.Exit(platformtest.Main(m, &env, main)) }

func TestBinary(t *testing.T) {
	platformtest.TestBinary(t, env, platformtest.Binary[config]{
		Name:    serviceName,
		Schemas: []string{dbschema.Fulfillment},
		Env: func(dbs []string) map[string]string {
			return map[string]string{
				"SPANNER_DATABASE":         dbs[0],
				"OIDC_AUDIENCE":            "http://fulfillment.test",
				"OIDC_ALLOWED_EMAILS":      "relay@spanmart.test",
				"WAREHOUSE_ALLOWED_EMAILS": "warehouse@spanmart.test",
			}
		},
		Load: loadConfig,
		Run:  run,
	})
}
