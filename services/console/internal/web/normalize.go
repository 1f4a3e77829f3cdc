package web

import (
	"regexp"
	"strings"
)

// The patterns normalizeError replaces, most specific first: a timestamp's digits would otherwise
// become numbers, a UUID's hex runs ids.
var (
	reTimestamp = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?`)
	reUUID      = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	// A hex run of 12 or more characters with at least one digit: a hash, a task name, a
	// provider's id; a long word such as "deadbeefcafe" without digits is left alone.
	reHex    = regexp.MustCompile(`(?i)\b[0-9a-f]*[0-9][0-9a-f]*\b`)
	reNumber = regexp.MustCompile(`\b\d+(\.\d+)?`)
	reSpace  = regexp.MustCompile(`\s+`)
)

// normalizeError is the key the failed-messages page groups by: the last error with timestamps,
// ids (UUIDs, long hex runs) and numbers replaced by placeholders, so that one cause failing
// for a thousand orders is one group, not a thousand.
func normalizeError(s string) string {
	s = reTimestamp.ReplaceAllString(s, "<time>")
	s = reUUID.ReplaceAllString(s, "<id>")
	s = reHex.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) >= 12 {
			return "<id>"
		}
		return m
	})
	s = reNumber.ReplaceAllString(s, "<n>")
	s = strings.TrimSpace(reSpace.ReplaceAllString(s, " "))
	if s == "" {
		return "(no error recorded)"
	}
	return s
}
