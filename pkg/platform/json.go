package platform

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// RequireJSON returns a 415 problem unless the request's Content-Type is application/json, with
// any parameters, a charset among them only if it is utf-8 (RFC 8259 §8.1).
func RequireJSON(req *http.Request) error {
	ct := req.Header.Get(echo.HeaderContentType)
	if mt, params, err := mime.ParseMediaType(ct); err == nil && mt == echo.MIMEApplicationJSON {
		if cs, ok := params["charset"]; !ok || strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	return NewProblem(http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type must be application/json, got %.80q", ct))
}

// JSONError is why DecodeJSONStrict refused a document, in the words of the API rather than of
// Go: Path is the JSON path of the offending value ("lines[0].quantity"), "" for the document as
// a whole.
type JSONError struct {
	Path   string
	Reason string // "must be an integer, got a string"
}

func (e *JSONError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + " " + e.Reason
}

// DecodeJSONStrict decodes the JSON document data into v (a pointer) and refuses what
// encoding/json lets through or words in Go terms:
//   - invalid UTF-8, and \u escapes of unpaired UTF-16 surrogates (encoding/json replaces both
//     with U+FFFD without a word);
//   - a key twice in one object, anywhere (encoding/json keeps the last);
//   - a key that names a struct field in another case ("Customer_ID"; encoding/json matches
//     case-insensitively) and unknown keys;
//   - a value of the wrong kind for its field, an integer with a fraction or out of range;
//   - anything after the document.
//
// The checks follow the json tags of v's type; a type with its own UnmarshalJSON (or
// UnmarshalText) is checked for duplicate keys and encoding only, and what its decoding then
// returns is passed on in API words too. Every error is a *JSONError.
func DecodeJSONStrict(data []byte, v any) error {
	s := &strictScanner{data: data, bad: invalidUTF8(data)}
	s.dec = json.NewDecoder(bytes.NewReader(data))
	s.dec.UseNumber()
	root := reflect.TypeOf(v)
	if root == nil || root.Kind() != reflect.Pointer {
		return fmt.Errorf("DecodeJSONStrict needs a pointer, got %T", v) // a programming error
	}
	if err := s.value(root.Elem(), ""); err != nil {
		return err
	}
	if _, err := s.dec.Token(); err != io.EOF {
		what := "value"
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
			what = "object"
		}
		return &JSONError{Reason: "the body has data after the JSON " + what}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apiError(err)
	}
	return nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// strictScanner walks a document token by token alongside the Go type it is decoded into.
type strictScanner struct {
	dec  *json.Decoder
	data []byte
	bad  int // offset of the first invalid UTF-8 byte, -1 if none
}

// token reads the next token and checks the encoding of a string (a key or a value).
func (s *strictScanner) token(path string) (json.Token, error) {
	start := s.dec.InputOffset()
	tok, err := s.dec.Token()
	if err != nil {
		return nil, syntaxError(err, len(bytes.TrimSpace(s.data)) == 0)
	}
	if _, ok := tok.(string); ok {
		end := s.dec.InputOffset()
		if s.bad >= 0 && int64(s.bad) >= start && int64(s.bad) < end {
			return nil, &JSONError{Path: pathOrBody(path), Reason: "is not valid UTF-8"}
		}
		if unpairedSurrogate(s.data[start:end]) {
			return nil, &JSONError{Path: pathOrBody(path), Reason: "has a \\u escape of an unpaired UTF-16 surrogate"}
		}
	}
	return tok, nil
}

// value checks the next value against t; t nil means any value.
func (s *strictScanner) value(t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)) {
		t = nil // its own decoding decides what it takes
	}
	tok, err := s.token(path)
	if err != nil {
		return err
	}
	if tok == nil || t == nil {
		// null leaves any Go value as it is, as in encoding/json.
		if d, ok := tok.(json.Delim); ok {
			return s.composite(d, t, path)
		}
		return nil
	}
	want := kindWord(t)
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if tok != json.Delim('{') {
			return wrongKind(path, want, tok)
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			if _, ok := tok.(string); !ok { // []byte is base64 text
				return wrongKind(path, want, tok)
			}
			return nil
		}
		if tok != json.Delim('[') {
			return wrongKind(path, want, tok)
		}
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return wrongKind(path, want, tok)
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return wrongKind(path, want, tok)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			return wrongKind(path, want, tok)
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return numberError(path, want, n, err)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := tok.(json.Number)
		if !ok {
			return wrongKind(path, want, tok)
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return numberError(path, want, n, err)
		}
	case reflect.Float32, reflect.Float64:
		n, ok := tok.(json.Number)
		if !ok {
			return wrongKind(path, want, tok)
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			return numberError(path, want, n, err)
		}
	}
	if d, ok := tok.(json.Delim); ok {
		return s.composite(d, t, path)
	}
	return nil
}

// composite checks the members of the object or array opened by d.
func (s *strictScanner) composite(d json.Delim, t reflect.Type, path string) error {
	if d == '[' {
		var elem reflect.Type
		if t != nil {
			elem = t.Elem()
		}
		for i := 0; s.dec.More(); i++ {
			if err := s.value(elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := s.token(path) // ]
		return err
	}
	var fields map[string]reflect.Type
	if t != nil && t.Kind() == reflect.Struct {
		fields = jsonFields(t)
	}
	seen := map[string]bool{}
	for s.dec.More() {
		tok, err := s.token(path)
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		member := key
		if path != "" {
			member = path + "." + key
		}
		if seen[key] {
			return &JSONError{Path: member, Reason: "is given twice (each key once)"}
		}
		seen[key] = true
		var vt reflect.Type
		switch {
		case fields != nil:
			ft, ok := fields[key]
			if !ok {
				return &JSONError{Reason: fmt.Sprintf("unknown field %q (field names are exact, case included)", member)}
			}
			vt = ft
		case t != nil: // a map
			vt = t.Elem()
		}
		if err := s.value(vt, member); err != nil {
			return err
		}
	}
	_, err := s.token(path) // }
	return err
}

// jsonFields maps the JSON names of t's fields, exactly as encoding/json names them, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for _, f := range reflect.VisibleFields(t) {
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && ft.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			continue // an embedded struct's fields are visible fields of their own
		}
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

// kindWord is what a value of t is called in a message.
func kindWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another kind of value"
}

// tokenWord is what a token is called in a message.
func tokenWord(tok json.Token) string {
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return "null"
}

func pathOrBody(path string) string {
	if path == "" {
		return "the body"
	}
	return path
}

func wrongKind(path, want string, tok json.Token) error {
	return &JSONError{Path: pathOrBody(path), Reason: fmt.Sprintf("must be %s, got %s", want, tokenWord(tok))}
}

func numberError(path, want string, n json.Number, err error) error {
	if errors.Is(err, strconv.ErrRange) {
		return &JSONError{Path: pathOrBody(path), Reason: fmt.Sprintf("must be %s, got %.40s, which is out of range", want, n)}
	}
	return &JSONError{Path: pathOrBody(path), Reason: fmt.Sprintf("must be %s, got %.40s", want, n)}
}

// syntaxError words a tokenizer error.
func syntaxError(err error, empty bool) error {
	var se *json.SyntaxError
	switch {
	case empty:
		return &JSONError{Reason: "the body is empty"}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &JSONError{Reason: "the body ends before its JSON value does"}
	case errors.As(err, &se):
		return &JSONError{Reason: fmt.Sprintf("the body is not valid JSON: %s (at byte %d)", strings.TrimPrefix(se.Error(), "json: "), se.Offset)}
	}
	return &JSONError{Reason: "the body is not valid JSON"}
}

// apiError words an error of encoding/json's decoding that the scan did not foresee: one from a
// type's own UnmarshalJSON. Its messages conventionally start with the field ("payment: json:
// cannot unmarshal array into Go value of type map[string]json.RawMessage").
func apiError(err error) error {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		path := ute.Field
		if path == "" {
			path, _, _ = strings.Cut(err.Error(), ": json: ")
			if strings.Contains(path, " ") || path == err.Error() {
				path = ""
			}
		}
		got, _, _ := strings.Cut(ute.Value, " ") // "number -5"
		if w, ok := valueWords[got]; ok {
			got = w
		}
		return &JSONError{Path: pathOrBody(path), Reason: fmt.Sprintf("must be %s, got %s", kindWord(ute.Type), got)}
	}
	msg := err.Error()
	if strings.Contains(msg, "Go ") || strings.Contains(msg, "json: ") {
		return &JSONError{Reason: "the body does not have the expected shape"}
	}
	return &JSONError{Reason: msg}
}

// valueWords words encoding/json's UnmarshalTypeError.Value as tokenWord does.
var valueWords = map[string]string{
	"object": "an object", "array": "an array", "string": "a string", "number": "a number", "bool": "a boolean",
}

// invalidUTF8 returns the offset of the first byte of data that is not valid UTF-8, -1 if none.
func invalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// unpairedSurrogate reports whether the raw string token in raw (possibly preceded by
// separators) has a \u escape of a UTF-16 surrogate that is not half of a pair.
func unpairedSurrogate(raw []byte) bool {
	escape := func(i int) (rune, bool) { // the \uXXXX at raw[i:]
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := escape(i)
		if !ok {
			i++ // another escape: skip its character (\\ included)
			continue
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if lo, ok := escape(i + 6); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}
