package sqlfuncs

import (
	"bytes"
	"database/sql/driver"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// Type shorthands for signatures.
var (
	tB  = spantype.TBool
	tI  = spantype.TInt64
	tF  = spantype.TFloat64
	tN  = spantype.TNumeric
	tS  = spantype.TString
	tY  = spantype.TBytes
	tD  = spantype.TDate
	tT  = spantype.TTimestamp
	tJ  = spantype.TJSON
	tAI = spantype.ArrayOf(spantype.TInt64)
	tAS = spantype.ArrayOf(spantype.TString)
	tAY = spantype.ArrayOf(spantype.TBytes)
)

// tX stands for "STRING or BYTES, the same in every position" in a signature template.
var tX = spantype.Type{Code: 1000}

// stringOrBytes expands a template using tX (and ARRAY<tX>) into a STRING and a BYTES overload.
func stringOrBytes(goName string, ret spantype.Type, params ...spantype.Type) []overload {
	var out []overload
	for _, t := range []spantype.Type{tS, tY} {
		subst := func(p spantype.Type) spantype.Type {
			switch {
			case p.Code == tX.Code:
				return t
			case p.Code == spantype.Array && p.Elem.Code == tX.Code:
				return spantype.ArrayOf(t)
			}
			return p
		}
		ps := make([]spantype.Type, len(params))
		for i, p := range params {
			ps[i] = subst(p)
		}
		out = append(out, sig(subst(ret), goCall(goName), ps...))
	}
	return out
}

// withOpt sets the number of optional trailing params on every overload.
func withOpt(n int, ovs []overload) []overload {
	for i := range ovs {
		ovs[i].optional = n
	}
	return ovs
}

// units splits a STRING (runes) or BYTES (bytes) value into its units, so that one Go function
// serves both overloads. isBytes tells which form to rebuild.
func units(v driver.Value) (us []string, isBytes bool) {
	if b, ok := v.([]byte); ok {
		us = make([]string, len(b))
		for i := range b {
			us[i] = string(b[i : i+1])
		}
		return us, true
	}
	s := asString(v)
	us = make([]string, 0, len(s))
	for _, r := range s {
		us = append(us, string(r))
	}
	return us, false
}

// sameKind returns s as the same storage kind as like ([]byte for BYTES, string for STRING).
func sameKind(like driver.Value, s string) driver.Value {
	if _, ok := like.([]byte); ok {
		return []byte(s)
	}
	return s
}

func isBytesValue(v driver.Value) bool { _, ok := v.([]byte); return ok }

func init() {
	for _, name := range []string{"LENGTH", "CHAR_LENGTH", "CHARACTER_LENGTH"} {
		ovs := stringOrBytes("spf_length", tI, tX)
		if name != "LENGTH" {
			ovs = ovs[:1]
		}
		defFunc(name, ovs...)
	}
	defStrict("spf_length", 1, func(a []driver.Value) (driver.Value, error) {
		if b, ok := a[0].([]byte); ok {
			return int64(len(b)), nil
		}
		return int64(utf8.RuneCountInString(asString(a[0]))), nil
	})
	defFunc("BYTE_LENGTH", stringOrBytes("spf_byte_length", tI, tX)...)
	defStrict("spf_byte_length", 1, func(a []driver.Value) (driver.Value, error) { return int64(len(asBytes(a[0]))), nil })

	defFunc("CONCAT", repAll(stringOrBytes("spf_concat", tX, tX))...)
	defStrict("spf_concat", -1, func(a []driver.Value) (driver.Value, error) {
		var b strings.Builder
		for _, v := range a {
			b.WriteString(asString(v))
		}
		if len(a) > 0 && isBytesValue(a[0]) {
			return []byte(b.String()), nil
		}
		return b.String(), nil
	})

	caseFn := func(goName string, str func(string) string, byt func([]byte) []byte) {
		defStrict(goName, 1, func(a []driver.Value) (driver.Value, error) {
			if b, ok := a[0].([]byte); ok {
				return byt(b), nil
			}
			return str(asString(a[0])), nil
		})
	}
	defFunc("UPPER", stringOrBytes("spf_upper", tX, tX)...)
	defFunc("LOWER", stringOrBytes("spf_lower", tX, tX)...)
	// BYTES change case in ASCII only.
	caseFn("spf_upper", strings.ToUpper, func(b []byte) []byte { return asciiMap(b, 'a', 'z', -32) })
	caseFn("spf_lower", strings.ToLower, func(b []byte) []byte { return asciiMap(b, 'A', 'Z', 32) })

	for _, name := range []string{"SUBSTR", "SUBSTRING"} {
		defFunc(name, withOpt(1, stringOrBytes("spf_substr", tX, tX, tI, tI))...)
	}
	defStrict("spf_substr", -1, func(a []driver.Value) (driver.Value, error) {
		us, _ := units(a[0])
		pos, err := asInt(a[1])
		if err != nil {
			return nil, err
		}
		n := int64(len(us))
		start := int64(0)
		switch {
		case pos > 0:
			start = pos - 1
		case pos < 0:
			start = max(n+pos, 0)
		}
		end := n
		if len(a) > 2 {
			l, err := asInt(a[2])
			if err != nil {
				return nil, err
			}
			if l < 0 {
				return nil, outOfRange("Third argument in SUBSTR() cannot be negative")
			}
			if l < n-start {
				end = start + l
			}
		}
		if start >= n {
			return sameKind(a[0], ""), nil
		}
		return sameKind(a[0], strings.Join(us[start:end], "")), nil
	})

	defFunc("STRPOS", stringOrBytes("spf_strpos", tI, tX, tX)...)
	defFunc("INSTR", withOpt(2, stringOrBytes("spf_strpos", tI, tX, tX, tI, tI))...)
	defStrict("spf_strpos", -1, func(a []driver.Value) (driver.Value, error) {
		s, sub := asString(a[0]), asString(a[1])
		pos, occ := int64(1), int64(1)
		var err error
		if len(a) > 2 {
			if pos, err = asInt(a[2]); err != nil {
				return nil, err
			}
		}
		if len(a) > 3 {
			if occ, err = asInt(a[3]); err != nil {
				return nil, err
			}
		}
		if pos == 0 || occ <= 0 {
			return nil, outOfRange("INSTR position must be non-zero and occurrence must be positive")
		}
		return instr(s, sub, pos, occ, isBytesValue(a[0])), nil
	})

	defFunc("STARTS_WITH", stringOrBytes("spf_starts_with", tB, tX, tX)...)
	defFunc("ENDS_WITH", stringOrBytes("spf_ends_with", tB, tX, tX)...)
	defStrict("spf_starts_with", 2, func(a []driver.Value) (driver.Value, error) {
		return boolValue(strings.HasPrefix(asString(a[0]), asString(a[1]))), nil
	})
	defStrict("spf_ends_with", 2, func(a []driver.Value) (driver.Value, error) {
		return boolValue(strings.HasSuffix(asString(a[0]), asString(a[1]))), nil
	})

	defFunc("REPLACE", stringOrBytes("spf_replace", tX, tX, tX, tX)...)
	defStrict("spf_replace", 3, func(a []driver.Value) (driver.Value, error) {
		s, from := asString(a[0]), asString(a[1])
		if from == "" {
			return a[0], nil
		}
		return sameKind(a[0], strings.ReplaceAll(s, from, asString(a[2]))), nil
	})

	for _, name := range []string{"TRIM", "LTRIM", "RTRIM"} {
		goName := "spf_" + strings.ToLower(name)
		ovs := stringOrBytes(goName, tX, tX, tX)
		ovs[0].optional = 1 // BYTES must name the bytes to trim
		defFunc(name, ovs...)
		left, right := name != "RTRIM", name != "LTRIM"
		defStrict(goName, -1, func(a []driver.Value) (driver.Value, error) {
			us, _ := units(a[0])
			cut := func(u string) bool { return unicode.IsSpace([]rune(u)[0]) }
			if len(a) > 1 {
				set, _ := units(a[1])
				cut = func(u string) bool {
					for _, c := range set {
						if c == u {
							return true
						}
					}
					return false
				}
			}
			i, j := 0, len(us)
			for left && i < j && cut(us[i]) {
				i++
			}
			for right && j > i && cut(us[j-1]) {
				j--
			}
			return sameKind(a[0], strings.Join(us[i:j], "")), nil
		})
	}

	for _, name := range []string{"LPAD", "RPAD"} {
		goName := "spf_" + strings.ToLower(name)
		defFunc(name, withOpt(1, stringOrBytes(goName, tX, tX, tI, tX))...)
		leftPad := name == "LPAD"
		defStrict(goName, -1, func(a []driver.Value) (driver.Value, error) {
			us, _ := units(a[0])
			n, err := asInt(a[1])
			if err != nil {
				return nil, err
			}
			pad := []string{" "}
			if len(a) > 2 {
				pad, _ = units(a[2])
			}
			if n < 0 {
				return nil, outOfRange("Second argument (length) for %s cannot be negative", strings.ToUpper(goName[4:]))
			}
			if n > 1<<20 {
				return nil, outOfRange("Output of %s exceeds the maximum allowed size", strings.ToUpper(goName[4:]))
			}
			if len(pad) == 0 {
				return nil, outOfRange("Third argument (pad pattern) for %s cannot be empty", strings.ToUpper(goName[4:]))
			}
			if int64(len(us)) >= n {
				return sameKind(a[0], strings.Join(us[:n], "")), nil
			}
			fill := make([]string, 0, n-int64(len(us)))
			for i := 0; int64(len(fill)) < n-int64(len(us)); i++ {
				fill = append(fill, pad[i%len(pad)])
			}
			if leftPad {
				return sameKind(a[0], strings.Join(fill, "")+strings.Join(us, "")), nil
			}
			return sameKind(a[0], strings.Join(us, "")+strings.Join(fill, "")), nil
		})
	}

	defFunc("REPEAT", stringOrBytes("spf_repeat", tX, tX, tI)...)
	defStrict("spf_repeat", 2, func(a []driver.Value) (driver.Value, error) {
		n, err := asInt(a[1])
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, outOfRange("Second argument to REPEAT must not be negative")
		}
		if size := int64(len(asString(a[0]))); size > 0 && n > (1<<24)/size {
			return nil, outOfRange("Output of REPEAT exceeds the maximum allowed size")
		}
		return sameKind(a[0], strings.Repeat(asString(a[0]), int(n))), nil
	})

	defFunc("REVERSE", stringOrBytes("spf_reverse", tX, tX)...)
	defStrict("spf_reverse", 1, func(a []driver.Value) (driver.Value, error) {
		us, _ := units(a[0])
		for i, j := 0, len(us)-1; i < j; i, j = i+1, j-1 {
			us[i], us[j] = us[j], us[i]
		}
		return sameKind(a[0], strings.Join(us, "")), nil
	})

	splitOvs := stringOrBytes("spf_split", spantype.ArrayOf(tX), tX, tX)
	splitOvs[0].optional = 1
	defFunc("SPLIT", splitOvs...)
	defStrict("spf_split", -1, func(a []driver.Value) (driver.Value, error) {
		s, delim := asString(a[0]), ","
		if len(a) > 1 {
			delim = asString(a[1])
		}
		var parts []string
		if delim == "" {
			parts, _ = units(a[0])
			if len(parts) == 0 {
				parts = []string{""}
			}
		} else {
			parts = strings.Split(s, delim)
		}
		return encodeStringsArray(parts, isBytesValue(a[0])), nil
	})

	defFunc("REGEXP_CONTAINS", stringOrBytes("spf_regexp_contains", tB, tX, tX)...)
	defStrict("spf_regexp_contains", 2, func(a []driver.Value) (driver.Value, error) {
		re, err := compileRegexp(asString(a[1]))
		if err != nil {
			return nil, err
		}
		return boolValue(re.MatchString(asString(a[0]))), nil
	})
	for _, name := range []string{"REGEXP_EXTRACT", "REGEXP_SUBSTR"} {
		defFunc(name, withOpt(2, stringOrBytes("spf_regexp_extract", tX, tX, tX, tI, tI))...)
	}
	defStrict("spf_regexp_extract", -1, func(a []driver.Value) (driver.Value, error) {
		re, err := compileExtractRegexp(asString(a[1]))
		if err != nil {
			return nil, err
		}
		s := asString(a[0])
		pos, occ := int64(1), int64(1)
		if len(a) > 2 {
			if pos, err = asInt(a[2]); err != nil {
				return nil, err
			}
		}
		if len(a) > 3 {
			if occ, err = asInt(a[3]); err != nil {
				return nil, err
			}
		}
		if pos <= 0 || occ <= 0 {
			return nil, outOfRange("REGEXP_EXTRACT position and occurrence must be positive")
		}
		offset := unitOffset(s, pos, isBytesValue(a[0]))
		if offset > len(s) {
			return nil, nil
		}
		matches := re.FindAllStringSubmatch(s[offset:], int(occ))
		if int64(len(matches)) < occ {
			return nil, nil
		}
		m := matches[occ-1]
		return sameKind(a[0], m[len(m)-1]), nil
	})
	defFunc("REGEXP_EXTRACT_ALL", stringOrBytes("spf_regexp_extract_all", spantype.ArrayOf(tX), tX, tX)...)
	defStrict("spf_regexp_extract_all", 2, func(a []driver.Value) (driver.Value, error) {
		re, err := compileExtractRegexp(asString(a[1]))
		if err != nil {
			return nil, err
		}
		out := []string{}
		for _, m := range re.FindAllStringSubmatch(asString(a[0]), -1) {
			out = append(out, m[len(m)-1])
		}
		return encodeStringsArray(out, isBytesValue(a[0])), nil
	})
	defFunc("REGEXP_REPLACE", stringOrBytes("spf_regexp_replace", tX, tX, tX, tX)...)
	defStrict("spf_regexp_replace", 3, func(a []driver.Value) (driver.Value, error) {
		re, err := compileRegexp(asString(a[1]))
		if err != nil {
			return nil, err
		}
		repl, err := goReplacement(asString(a[2]))
		if err != nil {
			return nil, err
		}
		return sameKind(a[0], re.ReplaceAllString(asString(a[0]), repl)), nil
	})

	defFunc("TO_BASE64", sig(tS, goCall("spf_to_base64"), tY))
	defStrict("spf_to_base64", 1, func(a []driver.Value) (driver.Value, error) {
		return base64.StdEncoding.EncodeToString(asBytes(a[0])), nil
	})
	defFunc("FROM_BASE64", sig(tY, goCall("spf_from_base64"), tS))
	defStrict("spf_from_base64", 1, func(a []driver.Value) (driver.Value, error) {
		b, err := base64.StdEncoding.DecodeString(asString(a[0]))
		if err != nil {
			return nil, outOfRange("Failed to decode invalid base64 string")
		}
		return nonNilBytes(b), nil
	})
	defFunc("TO_BASE32", sig(tS, goCall("spf_to_base32"), tY))
	defStrict("spf_to_base32", 1, func(a []driver.Value) (driver.Value, error) {
		return base32.StdEncoding.EncodeToString(asBytes(a[0])), nil
	})
	defFunc("FROM_BASE32", sig(tY, goCall("spf_from_base32"), tS))
	defStrict("spf_from_base32", 1, func(a []driver.Value) (driver.Value, error) {
		b, err := base32.StdEncoding.DecodeString(asString(a[0]))
		if err != nil {
			return nil, outOfRange("Failed to decode invalid base32 string")
		}
		return nonNilBytes(b), nil
	})
	defFunc("TO_HEX", sig(tS, goCall("spf_to_hex"), tY))
	defStrict("spf_to_hex", 1, func(a []driver.Value) (driver.Value, error) { return hex.EncodeToString(asBytes(a[0])), nil })
	defFunc("FROM_HEX", sig(tY, goCall("spf_from_hex"), tS))
	defStrict("spf_from_hex", 1, func(a []driver.Value) (driver.Value, error) {
		s := asString(a[0])
		if len(s)%2 == 1 {
			s = "0" + s
		}
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, outOfRange("Failed to decode invalid hexadecimal string: %q", asString(a[0]))
		}
		return nonNilBytes(b), nil
	})
	defFunc("SAFE_CONVERT_BYTES_TO_STRING", sig(tS, goCall("spf_safe_convert_bytes_to_string"), tY))
	defStrict("spf_safe_convert_bytes_to_string", 1, func(a []driver.Value) (driver.Value, error) {
		return strings.ToValidUTF8(asString(a[0]), "\uFFFD"), nil
	})
	defFunc("TO_CODE_POINTS", stringOrBytes("spf_to_code_points", tAI, tX)...)
	defStrict("spf_to_code_points", 1, func(a []driver.Value) (driver.Value, error) {
		var out []any
		if b, ok := a[0].([]byte); ok {
			for _, c := range b {
				out = append(out, int64(c))
			}
		} else {
			for _, r := range asString(a[0]) {
				out = append(out, int64(r))
			}
		}
		return encodeArray(tI, out), nil
	})
	defFunc("CODE_POINTS_TO_STRING", sig(tS, goCall("spf_code_points_to_string"), tAI))
	defFunc("CODE_POINTS_TO_BYTES", sig(tY, goCall("spf_code_points_to_bytes"), tAI))
	codePoints := func(a []driver.Value, isBytes bool) (driver.Value, error) {
		elems, err := decodeArray(tAI, a[0])
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		var raw []byte
		for _, e := range elems {
			if e == nil {
				return nil, nil
			}
			n, err := asInt(e)
			if err != nil {
				return nil, err
			}
			if isBytes {
				if n < 0 || n > 255 {
					return nil, outOfRange("Invalid input to CODE_POINTS_TO_BYTES: %d", n)
				}
				raw = append(raw, byte(n))
				continue
			}
			if n < 0 || n > unicode.MaxRune || (n >= 0xD800 && n <= 0xDFFF) {
				return nil, outOfRange("Invalid codepoint %d", n)
			}
			b.WriteRune(rune(n))
		}
		if isBytes {
			return nonNilBytes(raw), nil
		}
		return b.String(), nil
	}
	defStrict("spf_code_points_to_string", 1, func(a []driver.Value) (driver.Value, error) { return codePoints(a, false) })
	defStrict("spf_code_points_to_bytes", 1, func(a []driver.Value) (driver.Value, error) { return codePoints(a, true) })
	defFunc("ASCII", stringOrBytes("spf_ascii", tI, tX)...)
	defStrict("spf_ascii", 1, func(a []driver.Value) (driver.Value, error) {
		if b, ok := a[0].([]byte); ok {
			if len(b) == 0 {
				return int64(0), nil
			}
			return int64(b[0]), nil
		}
		s := asString(a[0])
		if s == "" {
			return int64(0), nil
		}
		r, _ := utf8.DecodeRuneInString(s)
		if r > 127 {
			return nil, outOfRange("ASCII() requires an ASCII first character")
		}
		return int64(r), nil
	})
	defFunc("SOUNDEX", sig(tS, goCall("spf_soundex"), tS))
	defStrict("spf_soundex", 1, func(a []driver.Value) (driver.Value, error) { return soundex(asString(a[0])), nil })
	defFunc("CHR", sig(tS, goCall("spf_chr"), tI))
	defStrict("spf_chr", 1, func(a []driver.Value) (driver.Value, error) {
		n, err := asInt(a[0])
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return "", nil
		}
		if n < 0 || n > unicode.MaxRune || (n >= 0xD800 && n <= 0xDFFF) {
			return nil, outOfRange("Invalid codepoint %d", n)
		}
		return string(rune(n)), nil
	})
}

// repAll marks the last parameter of every overload as repeating.
func repAll(ovs []overload) []overload {
	for i := range ovs {
		ovs[i].variadic = true
	}
	return ovs
}

func asciiMap(b []byte, lo, hi byte, delta int) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= lo && c <= hi {
			c = byte(int(c) + delta)
		}
		out[i] = c
	}
	return out
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// unitOffset returns the byte offset of the 1-based unit position pos.
func unitOffset(s string, pos int64, isBytes bool) int {
	if isBytes {
		return int(pos - 1)
	}
	i := int64(1)
	for off := range s {
		if i == pos {
			return off
		}
		i++
	}
	if i == pos {
		return len(s)
	}
	return len(s) + 1
}

// instr finds the occ-th occurrence of sub in s starting at unit pos (negative counts from the
// end and searches backwards), returning a 1-based unit position or 0.
func instr(s, sub string, pos, occ int64, isBytes bool) int64 {
	us, _ := units(sameKindOf(s, isBytes))
	ss, _ := units(sameKindOf(sub, isBytes))
	n, m := int64(len(us)), int64(len(ss))
	matchAt := func(i int64) bool {
		if i < 0 || i+m > n {
			return false
		}
		for k := int64(0); k < m; k++ {
			if us[i+k] != ss[k] {
				return false
			}
		}
		return true
	}
	found := int64(0)
	if pos > 0 {
		for i := pos - 1; i+m <= n; i++ {
			if matchAt(i) {
				if found++; found == occ {
					return i + 1
				}
			}
		}
		return 0
	}
	for i := n + pos - m + 1; i >= 0; i-- {
		if matchAt(i) {
			if found++; found == occ {
				return i + 1
			}
		}
	}
	return 0
}

func sameKindOf(s string, isBytes bool) driver.Value {
	if isBytes {
		return []byte(s)
	}
	return s
}

func encodeStringsArray(parts []string, isBytes bool) string {
	elems := make([]any, len(parts))
	t := tS
	for i, p := range parts {
		if isBytes {
			elems[i] = []byte(p)
			t = tY
		} else {
			elems[i] = p
		}
	}
	return encodeArray(t, elems)
}

var regexpCache memo[*regexp.Regexp]

func compileRegexp(pattern string) (*regexp.Regexp, error) {
	if re, ok := regexpCache.Load(pattern); ok {
		return re, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, outOfRange("Cannot parse regular expression: %v", err)
	}
	regexpCache.Store(pattern, re)
	return re, nil
}

func compileExtractRegexp(pattern string) (*regexp.Regexp, error) {
	re, err := compileRegexp(pattern)
	if err != nil {
		return nil, err
	}
	if re.NumSubexp() > 1 {
		return nil, outOfRange("Regular expressions passed into extraction functions must not have more than 1 capturing group")
	}
	return re, nil
}

// goReplacement turns a GoogleSQL replacement (\1 for a group, \\ for a backslash) into Go's
// ${1} syntax, escaping Go's $.
func goReplacement(s string) (string, error) {
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '$':
			b.WriteString("$$")
		case c == '\\':
			if i+1 == len(s) {
				return "", outOfRange("Invalid REGEXP_REPLACE pattern: trailing backslash")
			}
			i++
			if d := s[i]; d >= '0' && d <= '9' {
				b.WriteString("${" + string(d) + "}")
			} else if d == '\\' {
				b.WriteByte('\\')
			} else {
				return "", outOfRange("Invalid REGEXP_REPLACE pattern: invalid escape \\%c", d)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// soundex is American Soundex over the Latin letters of s (others are skipped): the first
// letter, then the digits of the following consonants, with repeats collapsed unless a vowel
// (not H or W) separates them, padded with zeros to four characters. No letters gives "".
func soundex(s string) string {
	const codes = "01230120022455012623010202" // A..Z
	var out []byte
	var last byte
	for _, r := range s {
		if r > unicode.MaxASCII || !unicode.IsLetter(r) {
			continue
		}
		up := byte(unicode.ToUpper(r))
		code := codes[up-'A']
		if out == nil {
			out = append(out, up)
			last = code
			continue
		}
		switch {
		case up == 'H' || up == 'W':
			// H and W do not separate letters with the same code.
		case code == '0':
			last = 0 // vowels separate
		case code != last:
			out = append(out, code)
			last = code
		}
		if len(out) == 4 {
			break
		}
	}
	if out == nil {
		return ""
	}
	for len(out) < 4 {
		out = append(out, '0')
	}
	return string(out)
}
