// Package conformance holds a test suite that pins down how Cloud Spanner behaves, as seen through
// the official Go clients (cloud.google.com/go/spanner and its admin clients), so that the
// in-process emulator in package spanneremu can be checked against it.
//
// The suite knows nothing about the emulator's internals: it only talks gRPC through the official
// clients. By default it starts spanneremu in-process; when SPANNER_EMULATOR_HOST is set it runs
// against that endpoint instead (for example Google's official emulator), which is how the
// expectations themselves are kept honest. See README.md.
package conformance
