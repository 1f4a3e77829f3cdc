package main

import "github.com/spanmart/spanmart/pkg/platform"

// serviceName is the default of K_SERVICE.
const serviceName = "gateway-abstraction"

// config is the service's configuration: what every database-owning service reads
// (platform.ServiceConfig) plus, later, its own variables.
type config struct {
	platform.ServiceConfig
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	cfg := config{ServiceConfig: platform.LoadServiceConfig(env, serviceName)}
	return cfg, env.Err()
}
