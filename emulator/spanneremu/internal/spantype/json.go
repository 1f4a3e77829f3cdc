package spantype

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"unicode/utf8"
)

// NormalizeJSON parses and re-renders a JSON document the way Spanner stores JSON: no
// insignificant white space, object keys sorted, the first of duplicate keys kept, numbers kept
// as written when they are exact. Anything but white space after the document is an error.
//
// It runs on every JSON value a commit writes (the outboxes' payloads among them), so it renders
// in one pass over the text: a string without escapes is copied as it is, and an object whose
// keys come sorted, as most do, is not rebuilt.
func NormalizeJSON(s string) (string, error) {
	n := jsonNormalizer{s: s, out: make([]byte, 0, len(s))}
	if err := n.value(0); err != nil {
		return "", fmt.Errorf("invalid JSON: %v", err)
	}
	n.space()
	if n.i < len(s) {
		return "", errors.New("invalid JSON: trailing data")
	}
	return string(n.out), nil
}

// maxJSONDepth bounds the nesting of arrays and objects, as encoding/json does.
const maxJSONDepth = 10000

type jsonNormalizer struct {
	s   string
	i   int
	out []byte
}

// jsonMember is an object member rendered into out[start:end] ("key":value).
type jsonMember struct {
	key        string
	start, end int
}

func (n *jsonNormalizer) space() {
	for n.i < len(n.s) {
		switch n.s[n.i] {
		case ' ', '\t', '\n', '\r':
			n.i++
		default:
			return
		}
	}
}

func (n *jsonNormalizer) unexpected() error {
	if n.i >= len(n.s) {
		return errors.New("unexpected end of JSON input")
	}
	return fmt.Errorf("invalid character %q at offset %d", n.s[n.i], n.i)
}

// expect consumes c, after white space.
func (n *jsonNormalizer) expect(c byte) error {
	n.space()
	if n.i >= len(n.s) || n.s[n.i] != c {
		return n.unexpected()
	}
	n.i++
	return nil
}

func (n *jsonNormalizer) value(depth int) error {
	n.space()
	if n.i >= len(n.s) {
		return n.unexpected()
	}
	switch c := n.s[n.i]; {
	case c == '{':
		return n.object(depth + 1)
	case c == '[':
		return n.array(depth + 1)
	case c == '"':
		_, err := n.str()
		return err
	case c == '-' || c >= '0' && c <= '9':
		return n.number()
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(n.s)-n.i >= len(lit) && n.s[n.i:n.i+len(lit)] == lit {
				n.out = append(n.out, lit...)
				n.i += len(lit)
				return nil
			}
		}
		return n.unexpected()
	}
}

func (n *jsonNormalizer) object(depth int) error {
	if depth > maxJSONDepth {
		return errors.New("exceeded max depth")
	}
	n.i++ // {
	n.out = append(n.out, '{')
	n.space()
	if n.i < len(n.s) && n.s[n.i] == '}' {
		n.i++
		n.out = append(n.out, '}')
		return nil
	}
	var members []jsonMember
	sorted := true
	for {
		n.space()
		if n.i >= len(n.s) || n.s[n.i] != '"' {
			return n.unexpected()
		}
		start := len(n.out)
		key, err := n.str()
		if err != nil {
			return err
		}
		if err := n.expect(':'); err != nil {
			return err
		}
		n.out = append(n.out, ':')
		if err := n.value(depth); err != nil {
			return err
		}
		if len(members) > 0 && key <= members[len(members)-1].key {
			sorted = false // out of order, or a duplicate
		}
		members = append(members, jsonMember{key: key, start: start, end: len(n.out)})
		n.space()
		if n.i < len(n.s) && n.s[n.i] == ',' {
			n.i++
			n.out = append(n.out, ',')
			continue
		}
		if err := n.expect('}'); err != nil {
			return err
		}
		break
	}
	if !sorted {
		n.sortMembers(members)
	}
	n.out = append(n.out, '}')
	return nil
}

// sortMembers renders members again, sorted by key, keeping the first of each key.
func (n *jsonNormalizer) sortMembers(members []jsonMember) {
	base := members[0].start
	rendered := append([]byte(nil), n.out[base:]...)
	sort.SliceStable(members, func(a, b int) bool { return members[a].key < members[b].key })
	n.out = n.out[:base]
	for k, m := range members {
		if k > 0 && m.key == members[k-1].key {
			continue
		}
		if len(n.out) > base {
			n.out = append(n.out, ',')
		}
		n.out = append(n.out, rendered[m.start-base:m.end-base]...)
	}
}

func (n *jsonNormalizer) array(depth int) error {
	if depth > maxJSONDepth {
		return errors.New("exceeded max depth")
	}
	n.i++ // [
	n.out = append(n.out, '[')
	n.space()
	if n.i < len(n.s) && n.s[n.i] == ']' {
		n.i++
		n.out = append(n.out, ']')
		return nil
	}
	for {
		if err := n.value(depth); err != nil {
			return err
		}
		n.space()
		if n.i < len(n.s) && n.s[n.i] == ',' {
			n.i++
			n.out = append(n.out, ',')
			continue
		}
		if err := n.expect(']'); err != nil {
			return err
		}
		n.out = append(n.out, ']')
		return nil
	}
}

// str renders the string at n.i and returns its value. A string as encoding/json writes it (no
// escapes, no control characters, valid UTF-8, no U+2028 or U+2029) is copied; any other is
// decoded and encoded again.
func (n *jsonNormalizer) str() (string, error) {
	start := n.i
	verbatim := true
	j := n.i + 1
	for {
		if j >= len(n.s) {
			n.i = j
			return "", n.unexpected()
		}
		c := n.s[j]
		switch {
		case c == '"':
			raw := n.s[start : j+1]
			n.i = j + 1
			if verbatim {
				n.out = append(n.out, raw...)
				return raw[1 : len(raw)-1], nil
			}
			var v string
			if err := json.Unmarshal([]byte(raw), &v); err != nil {
				return "", err
			}
			n.out = appendJSONString(n.out, v)
			return v, nil
		case c == '\\':
			verbatim = false
			j += 2
		case c < 0x20:
			n.i = j
			return "", fmt.Errorf("invalid character %q in string literal at offset %d", c, j)
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRuneInString(n.s[j:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				verbatim = false
			}
			j += size
		}
	}
}

// appendJSONString appends s as encoding/json encodes it, without its HTML escapes (Spanner
// leaves <, > and & as they are).
func appendJSONString(out []byte, s string) []byte {
	var b jsonBuffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)                   // a string always encodes
	return append(out, b[:len(b)-1]...) // without Encode's newline
}

// jsonBuffer is an io.Writer appending to itself.
type jsonBuffer []byte

func (b *jsonBuffer) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

// number copies the number at n.i as written, after checking its syntax.
func (n *jsonNormalizer) number() error {
	start := n.i
	digits := func() int {
		k := 0
		for n.i < len(n.s) && n.s[n.i] >= '0' && n.s[n.i] <= '9' {
			n.i++
			k++
		}
		return k
	}
	if n.s[n.i] == '-' {
		n.i++
	}
	switch {
	case n.i < len(n.s) && n.s[n.i] == '0':
		n.i++
	case digits() == 0:
		return n.unexpected()
	}
	if n.i < len(n.s) && n.s[n.i] == '.' {
		n.i++
		if digits() == 0 {
			return n.unexpected()
		}
	}
	if n.i < len(n.s) && (n.s[n.i] == 'e' || n.s[n.i] == 'E') {
		n.i++
		if n.i < len(n.s) && (n.s[n.i] == '+' || n.s[n.i] == '-') {
			n.i++
		}
		if digits() == 0 {
			return n.unexpected()
		}
	}
	n.out = append(n.out, n.s[start:n.i]...)
	return nil
}
