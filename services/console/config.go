package main

import "github.com/spanmart/spanmart/pkg/platform"

// serviceName is the default of K_SERVICE.
const serviceName = "console"

// config is the console's configuration.
type config struct {
	platform.Config
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	cfg := config{Config: platform.LoadConfig(env, serviceName, env.Lookup("GOOGLE_CLOUD_PROJECT"))}
	return cfg, env.Err()
}
