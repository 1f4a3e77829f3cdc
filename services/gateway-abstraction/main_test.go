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
		Schemas: []string{dbschema.Payments},
		Env: func(dbs []string) map[string]string {
			return map[string]string{
				"SPANNER_DATABASE":      dbs[0],
				"OIDC_AUDIENCE":         "http://gateway.test",
				"OIDC_ALLOWED_EMAILS":   "relay@spanmart.test",
				"STRIPE_API_KEY":        "sk_test_binary",
				"STRIPE_WEBHOOK_SECRET": "whsec_binary",
				"KOMOJU_SECRET_KEY":     "sk_test_binary",
				"KOMOJU_WEBHOOK_SECRET": "komoju_binary",
			}
		},
		Load: loadConfig,
		Run:  run,
	})
}
