# Spanmart developer commands. Everything needs only Go (see README.md).
.PHONY: dev test generate build clean demo bench bench-scale fuzz

# dev: run the whole system locally (emulators, schema, seed data, five services); Ctrl-C stops it.
dev:
	go run ./emulator/devstack

# test: run every test, exactly what CI runs.
test:
	go test ./...

# generate: regenerate generated code (gen/dao from the schemas).
generate:
	go generate ./...

# build: compile every package and command (binaries are discarded; the dev stack builds its own).
build:
	go build ./...

# clean: remove the dev stack state (.state/: databases, queues, tasks, logs, binaries).
clean:
	go run ./emulator/devstack -clean

# demo: the whole order saga (the classic saga lab story, a relay crash, a naive order the detector flags) on a stack of its own; prints and checks the state.
demo:
	go run ./e2e/cmd/demo

# bench: orders through the whole saga at fixed rates on a stack of its own; prints throughput, per-hop latency and what an order costs (flags: go run ./e2e/cmd/bench -h).
bench:
	go run ./e2e/cmd/bench

# bench-scale: the relay's throughput on a pre-loaded outbox with 1, 2 and 4 instances, and how their shard leases spread.
bench-scale:
	go run ./e2e/cmd/bench -mode scale

# soak: mixed load through the whole saga for SOAK_DURATION (default 10m) under injected faults, then every invariant checked; prints a summary, draws docs/soak.png, exits 1 if one fails.
SOAK_DURATION ?= 10m
.PHONY: soak
soak:
	go run ./e2e/cmd/soak -duration $(SOAK_DURATION)

# fuzz: every fuzz target of the repository (found in the test files by tools/fuzzall) for FUZZTIME each (default 30s); the README's test command runs each for 5s (TestFuzzTargets).
FUZZTIME ?= 30s
fuzz:
	go run ./tools/fuzzall -fuzztime $(FUZZTIME)
