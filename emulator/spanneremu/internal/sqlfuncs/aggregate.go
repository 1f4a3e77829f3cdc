package sqlfuncs

import "strings"

// IsAggregate reports whether name (case-insensitive) is an aggregate function.
func IsAggregate(name string) bool {
	_, ok := aggregates[strings.ToUpper(name)]
	return ok
}

var aggregates = map[string]func(c Call) (Arg, error){}
