package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// prettyLog renders one structured log line as the services write it (Cloud Logging JSON from
// pkg/platform: severity, message, time and fields) as "SEVERITY message key=value ...", which is
// what a person at a terminal wants to read. ok is false for anything else (emulator output, a
// panic's stack trace), which is shown as it is. The log files keep the original JSON.
func prettyLog(line string) (out string, ok bool) {
	if !strings.HasPrefix(line, "{") {
		return "", false
	}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	var severity, message string
	var fields []string
	hasMessage := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", false
		}
		switch key {
		case "severity":
			json.Unmarshal(raw, &severity)
		case "message":
			hasMessage = json.Unmarshal(raw, &message) == nil
		case "time", "serviceContext", "logging.googleapis.com/sourceLocation":
			// Noise on a terminal: the time is the terminal's now, the service is in the prefix.
		default:
			key = strings.TrimPrefix(key, "logging.googleapis.com/")
			fields = append(fields, key+"="+renderValue(raw))
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') || !hasMessage {
		return "", false
	}
	var b strings.Builder
	if severity != "" {
		b.WriteString(severity)
		b.WriteByte(' ')
	}
	b.WriteString(message)
	for _, f := range fields {
		b.WriteByte(' ')
		b.WriteString(f)
	}
	// Every field, keys included, comes from whoever wrote the line, or from a client whose request
	// it logs: escaped so that it cannot drive the terminal, and so that a multi-line message (a
	// stack trace field, say) keeps the one-line-per-entry layout.
	return terminalSafe(b.String()), true
}

// renderValue shows a JSON string bare when that is unambiguous and anything else compactly.
func renderValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "" && !strings.ContainsAny(s, " \t\n\"=") {
			return s
		}
		return strconv.Quote(s)
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
