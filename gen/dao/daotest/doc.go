// Package daotest holds the integration tests of the generated DAO packages (every table of every
// database, run against the in-process Spanner emulator) and typesdb, the code generated from
// tools/daogen/testdata/types, so that every column type's mapping is checked against the official
// client and the emulator.
package daotest

//go:generate go run ../../../tools/daogen -schema ../../../tools/daogen/testdata/types -name types -out .
