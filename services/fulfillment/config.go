package main

import "github.com/spanmart/spanmart/pkg/platform"

// serviceName is the default of K_SERVICE.
const serviceName = "fulfillment"

type config struct {
	platform.Config
	Database platform.DatabaseName // SPANNER_DATABASE, required
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	db := env.Database("SPANNER_DATABASE")
	cfg := config{Config: platform.LoadConfig(env, serviceName, db.Project), Database: db}
	return cfg, env.Err()
}
