# Spanmart developer commands. Everything needs only Go (see README.md).
.PHONY: dev test generate build clean

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
