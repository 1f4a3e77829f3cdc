# Spanmart developer commands. Everything needs only Go (see README.md).
.PHONY: dev test generate build clean demo bench-relay fuzz

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

# bench-relay: orders at fixed rates through the real stack; prints relay throughput and latency.
bench-relay:
	go run ./e2e/cmd/bench

# fuzz: each fuzz target for FUZZTIME (default 30s); the README's test command runs their seeds only.
FUZZTIME ?= 30s
fuzz:
	go test -run '^$$' -fuzz FuzzDecodeJSONStrict -fuzztime $(FUZZTIME) ./pkg/platform
	go test -run '^$$' -fuzz FuzzParseWebhook -fuzztime $(FUZZTIME) ./services/gateway-abstraction/internal/provider/stripe
	go test -run '^$$' -fuzz FuzzParseWebhook -fuzztime $(FUZZTIME) ./services/gateway-abstraction/internal/provider/komoju
