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
		Schemas: []string{dbschema.Orders},
		Env: func(dbs []string) map[string]string {
			return map[string]string{
				"SPANNER_DATABASE":    dbs[0],
				"OIDC_AUDIENCE":       "http://orders.test",
				"OIDC_ALLOWED_EMAILS": "relay@spanmart.test",
				"CUSTOMER_ISSUER":     "https://securetoken.google.com/spanmart-test",
				"CUSTOMER_AUDIENCE":   "spanmart-test",
			}
		},
		Load: loadConfig,
		Run:  run,
	})
}
