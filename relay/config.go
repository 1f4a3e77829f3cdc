package main

import "github.com/spanmart/spanmart/pkg/platform"

// serviceName is the default of K_SERVICE.
const serviceName = "relay"

type config struct {
	platform.Config
	// Sources are the service databases whose outboxes the relay delivers (RELAY_SOURCES,
	// comma-separated full database names, required).
	Sources []platform.DatabaseName
}

// loadConfig reads the environment through getenv and reports every missing or invalid
// variable in one error.
func loadConfig(getenv func(string) string) (config, error) {
	env := platform.NewEnv(getenv)
	sources := env.Databases("RELAY_SOURCES")
	var project string
	if len(sources) > 0 {
		project = sources[0].Project
	}
	cfg := config{Config: platform.LoadConfig(env, serviceName, project), Sources: sources}
	return cfg, env.Err()
}
