package sqlfuncs

import (
	"database/sql/driver"
	"strings"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// NORMALIZE and NORMALIZE_AND_CASEFOLD take an optional mode (NFC, the default, NFKC, NFD or
// NFKD). The mode is a keyword in GoogleSQL; it arrives here as a STRING literal and must be
// one, so a bad mode fails at translation time.
func init() {
	for _, name := range []string{"NORMALIZE", "NORMALIZE_AND_CASEFOLD"} {
		goName := "spf_" + strings.ToLower(name)
		scalars[name] = func(c Call) (Arg, error) {
			if len(c.Args) != 1 && len(c.Args) != 2 {
				return Arg{}, arity(c, "1 or 2")
			}
			mode := "NFC"
			if len(c.Args) == 2 {
				if c.Args[1].StringLiteral == nil {
					return Arg{}, errorf("%s requires a normalization mode keyword (NFC, NFKC, NFD, NFKD)", name)
				}
				mode = strings.ToUpper(*c.Args[1].StringLiteral)
				if _, ok := normForms[mode]; !ok {
					return Arg{}, errorf("Unknown normalization mode %s", mode)
				}
			}
			return resolve(Call{Name: name, Args: c.Args[:1]}, []overload{sig(tS, func(a []Arg) string {
				return sqlCall(goName, a[0].SQL, sqlString(mode))
			}, tS)})
		}
		fold := name == "NORMALIZE_AND_CASEFOLD"
		defStrict(goName, 2, func(a []driver.Value) (driver.Value, error) {
			s := asString(a[0])
			if fold {
				s = cases.Fold().String(s)
			}
			return normForms[asString(a[1])].String(s), nil
		})
	}
}

var normForms = map[string]norm.Form{"NFC": norm.NFC, "NFKC": norm.NFKC, "NFD": norm.NFD, "NFKD": norm.NFKD}
