// Package migrate applies Spanmart's ordered Spanner DDL migrations through the admin API
// (UpdateDatabaseDdl) and records what ran in a SchemaMigrations table of the database itself.
//
// A database is made of one or more migration streams applied in order: the outbox stream shared by
// every service database (pkg/outboxlib/schema) and then the service's own (services/<svc>/schema).
// Each stream is versioned on its own, so the shared outbox tables are written once and evolve once
// for all four databases. pkg/dbschema lists the streams of every database.
//
// The runner is safe to run again and again (tests, the dev stack, Cloud Build): it applies only what
// is not recorded, refuses to run when an applied file was edited afterwards, and claims a migration
// by inserting its row before running its DDL, so two runners racing on one database cannot both
// apply it. Spanner DDL is not transactional: a batch that fails half-way leaves its row marked Dirty,
// and the runner refuses to continue until an operator has looked (see ErrDirty).
package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/cloudspannerecosystem/memefish"
)

// Table is the name of the table that records applied migrations.
const Table = "SchemaMigrations"

// tableDDL creates Table. It is not part of any stream: the runner owns it.
const tableDDL = `CREATE TABLE SchemaMigrations (
  Stream    STRING(64)  NOT NULL,
  Version   INT64       NOT NULL,
  Name      STRING(256) NOT NULL,
  Checksum  STRING(64)  NOT NULL,
  Dirty     BOOL        NOT NULL,
  AppliedAt TIMESTAMP   NOT NULL OPTIONS (allow_commit_timestamp = true),
) PRIMARY KEY (Stream, Version)`

// A Stream is one ordered series of migration files.
type Stream struct {
	// Name identifies the stream in SchemaMigrations ("outbox", "orders", ...).
	Name string
	// Dir is the directory of the files relative to the repository root, used in messages and in
	// the header of generated code.
	Dir string
	// FS holds the files, named NNNN_description.sql.
	FS fs.FS
}

// A Database is a Spanner database and the streams that build its schema, in application order.
type Database struct {
	Name    string
	Streams []Stream
}

// A Migration is one file of a stream.
type Migration struct {
	Stream     string
	Version    int64
	Name       string // file name, e.g. 0001_init.sql
	Path       string // Dir/Name
	Statements []string
	Checksum   string // hex SHA-256 of the file's bytes
}

func (m Migration) String() string { return m.Stream + "/" + m.Name }

var fileName = regexp.MustCompile(`^([0-9]{4,})_[a-z0-9_]+\.sql$`)

// Load reads and parses the stream's files in version order. Every statement is parsed with
// memefish, so a syntax error is reported with its file and line before anything reaches Spanner.
func (s Stream) Load() ([]Migration, error) {
	entries, err := fs.ReadDir(s.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations of stream %s: %w", s.Name, err)
	}
	var out []Migration
	seen := map[int64]string{}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".sql" {
			continue
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("stream %s: migration file %q is not named NNNN_description.sql", s.Name, e.Name())
		}
		version, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || version <= 0 {
			return nil, fmt.Errorf("stream %s: migration file %q: version must be a positive number", s.Name, e.Name())
		}
		if prev, dup := seen[version]; dup {
			return nil, fmt.Errorf("stream %s: %s and %s have the same version %d", s.Name, prev, e.Name(), version)
		}
		seen[version] = e.Name()
		raw, err := fs.ReadFile(s.FS, e.Name())
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", s.Name, err)
		}
		p := path.Join(s.Dir, e.Name())
		stmts, err := SplitStatements(p, string(raw))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(raw)
		out = append(out, Migration{
			Stream: s.Name, Version: version, Name: e.Name(), Path: p,
			Statements: stmts, Checksum: hex.EncodeToString(sum[:]),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	if len(out) == 0 {
		return nil, fmt.Errorf("stream %s has no migrations in %s", s.Name, s.Dir)
	}
	return out, nil
}

// Migrations returns every migration of the database in application order.
func (d Database) Migrations() ([]Migration, error) {
	var all []Migration
	names := map[string]bool{}
	for _, s := range d.Streams {
		if names[s.Name] {
			return nil, fmt.Errorf("database %s lists stream %s twice", d.Name, s.Name)
		}
		names[s.Name] = true
		ms, err := s.Load()
		if err != nil {
			return nil, err
		}
		all = append(all, ms...)
	}
	return all, nil
}

// SplitStatements splits a DDL file into statements (without the terminating semicolons or
// surrounding comments) and checks that each one parses.
func SplitStatements(file, text string) ([]string, error) {
	raws, err := memefish.SplitRawStatements(file, text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var out []string
	for _, r := range raws {
		stmt := strings.TrimSpace(stripComments(r.Statement))
		if stmt == "" {
			continue
		}
		if _, err := memefish.ParseDDL(file, r.Statement); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, stmt)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no statements", file)
	}
	return out, nil
}

// stripComments removes -- and # line comments that are outside string literals, so that what is
// sent to Spanner (and shown in GetDatabaseDdl) is the statement alone.
func stripComments(s string) string {
	var b strings.Builder
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			b.WriteByte(c)
			if c == '\\' && i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
			b.WriteByte(c)
		case c == '#' || (c == '-' && i+1 < len(s) && s[i+1] == '-'):
			for i < len(s) && s[i] != '\n' {
				i++
			}
			if i < len(s) {
				b.WriteByte('\n')
			}
		default:
			b.WriteByte(c)
		}
	}
	// Drop the blank lines comments leave behind.
	lines := strings.Split(b.String(), "\n")
	kept := lines[:0]
	for _, l := range lines {
		if l = strings.TrimRight(l, " \t"); l != "" {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

// ErrDirty is returned when a migration was claimed but did not finish: its DDL may be partly applied.
// Compare GetDatabaseDdl with the file, finish or undo the statements by hand, then delete or fix
// the SchemaMigrations row.
var ErrDirty = errors.New("migration did not finish")
