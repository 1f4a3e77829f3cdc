package spantype

import (
	"fmt"
	"strings"
)

// ParseType parses a type as Type.String renders it (INT64, ARRAY<STRING>,
// STRUCT<a INT64, STRING>). Generated SQL embeds types this way for the Go functions that
// need them.
func ParseType(s string) (Type, error) {
	p := &typeParser{s: s}
	t, err := p.parse()
	if err != nil {
		return TUnknown, err
	}
	p.space()
	if p.i != len(p.s) {
		return TUnknown, fmt.Errorf("trailing text in type %q", s)
	}
	return t, nil
}

type typeParser struct {
	s string
	i int
}

func (p *typeParser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *typeParser) word() string {
	p.space()
	j := p.i
	for p.i < len(p.s) && (p.s[p.i] == '_' || p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] >= 'A' && p.s[p.i] <= 'Z' || p.s[p.i] >= 'a' && p.s[p.i] <= 'z') {
		p.i++
	}
	return p.s[j:p.i]
}

func (p *typeParser) expect(c byte) error {
	p.space()
	if p.i >= len(p.s) || p.s[p.i] != c {
		return fmt.Errorf("expected %q at %d in type %q", c, p.i, p.s)
	}
	p.i++
	return nil
}

func (p *typeParser) parse() (Type, error) {
	w := p.word()
	switch strings.ToUpper(w) {
	case "ARRAY":
		if err := p.expect('<'); err != nil {
			return TUnknown, err
		}
		e, err := p.parse()
		if err != nil {
			return TUnknown, err
		}
		if err := p.expect('>'); err != nil {
			return TUnknown, err
		}
		return ArrayOf(e), nil
	case "STRUCT":
		if err := p.expect('<'); err != nil {
			return TUnknown, err
		}
		var fs []Field
		p.space()
		if p.i < len(p.s) && p.s[p.i] == '>' {
			p.i++
			return StructOf(), nil
		}
		for {
			save := p.i
			name := p.word()
			p.space()
			var f Field
			if p.i < len(p.s) && (p.s[p.i] == ',' || p.s[p.i] == '>' || p.s[p.i] == '<') {
				// No field name: the word was the type.
				p.i = save
				t, err := p.parse()
				if err != nil {
					return TUnknown, err
				}
				f = Field{Type: t}
			} else {
				t, err := p.parse()
				if err != nil {
					return TUnknown, err
				}
				f = Field{Name: name, Type: t}
			}
			fs = append(fs, f)
			p.space()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
				continue
			}
			if err := p.expect('>'); err != nil {
				return TUnknown, err
			}
			return StructOf(fs...), nil
		}
	case "UNKNOWN":
		return TUnknown, nil
	}
	t, ok := ParseScalarName(w)
	if !ok {
		return TUnknown, fmt.Errorf("unknown type %q in %q", w, p.s)
	}
	return t, nil
}
