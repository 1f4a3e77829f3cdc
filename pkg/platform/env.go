package platform

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Env reads configuration from environment variables and collects every problem instead of
// stopping at the first, so an operator fixes a deployment in one round trip. Read all variables,
// then call Err.
type Env struct {
	getenv  func(string) string
	missing []string
	invalid []string
}

// NewEnv returns an Env reading through getenv (os.Getenv in main, a map lookup in tests).
func NewEnv(getenv func(string) string) *Env {
	return &Env{getenv: getenv}
}

// Lookup returns the trimmed value of name, "" when unset.
func (e *Env) Lookup(name string) string {
	return strings.TrimSpace(e.getenv(name))
}

// String returns the value of name, or def when it is unset or empty.
func (e *Env) String(name, def string) string {
	if v := e.Lookup(name); v != "" {
		return v
	}
	return def
}

// Required returns the value of name and records it as missing when it is unset or empty.
func (e *Env) Required(name string) string {
	v := e.Lookup(name)
	if v == "" {
		e.Missing(name)
	}
	return v
}

// Int returns the value of name as an int in [lo, hi], def when unset.
func (e *Env) Int(name string, def, lo, hi int) int {
	v := e.Lookup(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.Invalid(name, v, fmt.Errorf("not an integer"))
		return def
	}
	if n < lo || n > hi {
		e.Invalid(name, v, fmt.Errorf("want %d..%d", lo, hi))
		return def
	}
	return n
}

// Int64 returns the value of name as an int64 in [lo, hi], def when unset.
func (e *Env) Int64(name string, def, lo, hi int64) int64 {
	v := e.Lookup(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		e.Invalid(name, v, fmt.Errorf("not an integer"))
		return def
	}
	if n < lo || n > hi {
		e.Invalid(name, v, fmt.Errorf("want %d..%d", lo, hi))
		return def
	}
	return n
}

// Duration returns the value of name as a Go duration ("90s", "2h") in [lo, hi], def when unset.
func (e *Env) Duration(name string, def, lo, hi time.Duration) time.Duration {
	v := e.Lookup(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.Invalid(name, v, fmt.Errorf("not a duration like 90s or 2h"))
		return def
	}
	if d < lo || d > hi {
		e.Invalid(name, v, fmt.Errorf("want %s..%s", lo, hi))
		return def
	}
	return d
}

// Enum returns the value of name, which must be one of allowed (compared case-insensitively and
// returned lowercased), def when unset.
func (e *Env) Enum(name, def string, allowed ...string) string {
	v := e.Lookup(name)
	if v == "" {
		return def
	}
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return a
		}
	}
	e.Invalid(name, v, fmt.Errorf("want one of %s", strings.Join(allowed, ", ")))
	return def
}

// Bool returns the value of name, "true" or "false" (any case), def when unset.
func (e *Env) Bool(name string, def bool) bool {
	switch e.Enum(name, "", "true", "false") {
	case "true":
		return true
	case "false":
		return false
	}
	return def
}

// Database returns the required full Spanner database name in name.
func (e *Env) Database(name string) DatabaseName {
	v := e.Required(name)
	if v == "" {
		return DatabaseName{}
	}
	db, err := ParseDatabaseName(v)
	if err != nil {
		e.Invalid(name, v, err)
	}
	return db
}

// Databases returns the required comma-separated list of full Spanner database names in name.
// Duplicates are invalid: they would make a process do the same work twice.
func (e *Env) Databases(name string) []DatabaseName {
	v := e.Required(name)
	if v == "" {
		return nil
	}
	var dbs []DatabaseName
	seen := map[DatabaseName]bool{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		db, err := ParseDatabaseName(part)
		if err != nil {
			e.Invalid(name, v, fmt.Errorf("%s: %w", part, err))
			return nil
		}
		if seen[db] {
			e.Invalid(name, v, fmt.Errorf("%s is listed twice", part))
			return nil
		}
		seen[db] = true
		dbs = append(dbs, db)
	}
	if len(dbs) == 0 {
		e.Invalid(name, v, fmt.Errorf("no database names"))
	}
	return dbs
}

// Missing records name as a missing required variable (for checks Env has no helper for).
func (e *Env) Missing(name string) {
	e.missing = append(e.missing, name)
}

// Invalid records that name has the unusable value v.
func (e *Env) Invalid(name, v string, err error) {
	e.invalid = append(e.invalid, fmt.Sprintf("invalid %s %q: %v", name, v, err))
}

// Err returns nil or one error naming every missing and invalid variable recorded so far, e.g.
// `missing SPANNER_DATABASE; invalid PORT "x": not an integer`.
func (e *Env) Err() error {
	if len(e.missing) == 0 && len(e.invalid) == 0 {
		return nil
	}
	return &ConfigError{Missing: append([]string(nil), e.missing...), Invalid: append([]string(nil), e.invalid...)}
}

// ConfigError lists every missing and invalid environment variable.
type ConfigError struct {
	Missing []string // variable names
	Invalid []string // `invalid NAME "value": reason`
}

func (e *ConfigError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		parts = append(parts, "missing "+strings.Join(e.Missing, ", "))
	}
	parts = append(parts, e.Invalid...)
	return strings.Join(parts, "; ")
}

// URL reads an absolute http(s) URL; def is used when the variable is unset ("" = optional).
func (e *Env) URL(name, def string) string {
	v := e.String(name, def)
	if v == "" {
		return ""
	}
	if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		e.Invalid(name, v, errors.New("want an absolute http(s) URL"))
	}
	return v
}

// List reads a comma-separated list, dropping empty items; a required list that is set but holds
// no item is reported missing.
func (e *Env) List(name string, required bool) []string {
	var out []string
	for _, item := range strings.Split(e.Lookup(name), ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	if required && len(out) == 0 {
		e.Missing(name)
	}
	return out
}
