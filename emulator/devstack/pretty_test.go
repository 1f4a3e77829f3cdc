package main

import (
	"bytes"
	"os"
	"testing"
)

func TestPrettyLog(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		ok             bool
	}{
		{
			name: "service line",
			in:   `{"severity":"INFO","time":"2026-11-29T15:50:18.9Z","message":"starting","serviceContext":{"service":"orders"},"service":"orders","addr":"[::]:8081","logging.googleapis.com/sourceLocation":{"file":"run.go"}}`,
			want: "INFO starting service=orders addr=[::]:8081",
			ok:   true,
		},
		{
			name: "quoting, numbers, objects, trace",
			in:   `{"severity":"ERROR","message":"request failed","error":"dial tcp: refused","status":503,"labels":{"a":1},"logging.googleapis.com/trace":"projects/p/traces/abc"}`,
			want: `ERROR request failed error="dial tcp: refused" status=503 labels={"a":1} trace=projects/p/traces/abc`,
			ok:   true,
		},
		{name: "multi-line message", in: `{"message":"a\nb"}`, want: `a\nb`, ok: true},
		{
			// zap writes an ESC in a request path as \u001b; decoded, it would reach the terminal.
			name: "escape sequences in every field",
			in:   `{"severity":"WARN\u001b[5m","message":"no route\u001b]0;pwned\u0007","path":"/\u001b[2J","query":"a=\u009b31m\u0000\u007f","k\u001b[1A":1,"ua":"x\ty"}`,
			want: `WARN\x1b[5m no route\x1b]0;pwned\x07 path=/\x1b[2J query="a=\u009b31m\x00\x7f" k\x1b[1A=1 ua="x\ty"`,
			ok:   true,
		},
		{name: "emulator line", in: "spanneremu: ready on 127.0.0.1:9010"},
		{name: "JSON without a message", in: `{"queues":[]}`},
		{name: "broken JSON", in: `{"message":"x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := prettyLog(tc.in)
			if ok != tc.ok || got != tc.want {
				t.Errorf("prettyLog(%s) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestTerminalSafe(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{name: "printable ASCII", in: "GET /v1/orders?id=1 200", want: "GET /v1/orders?id=1 200"},
		{name: "tab kept", in: "a\tb", want: "a\tb"},
		{name: "newline and return", in: "a\nb\rc", want: `a\nb\rc`},
		{name: "clear screen", in: "/\x1b[2J", want: `/\x1b[2J`},
		{name: "NUL, BEL, DEL", in: "\x00\x07\x7f", want: `\x00\x07\x7f`},
		{name: "C1 CSI as a rune", in: "\u009b2J", want: `\u009b2J`},
		{name: "C1 CSI as a raw byte", in: "\x9b2J", want: `\x9b2J`},
		{name: "other UTF-8 kept", in: "注文 é ✓ \u00a0", want: "注文 é ✓ \u00a0"},
		{name: "backslash kept", in: `\x1b`, want: `\x1b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := terminalSafe(tc.in)
			if got != tc.want {
				t.Errorf("terminalSafe(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again := terminalSafe(got); again != got {
				t.Errorf("terminalSafe not idempotent: %q, then %q", got, again)
			}
		})
	}
}

// The console escapes every line it shows, pretty or not (an emulator's own output, the
// devstack's lines, the tail shown when a process is not ready), but keeps the log file's bytes.
func TestConsoleEscapesControlCharacters(t *testing.T) {
	var out bytes.Buffer
	c := &console{out: &out, width: len("spanneremu"), files: map[string]*os.File{}, colors: map[string]string{}}
	c.line("spanneremu", "query \x1b[2J\x1b[H done")
	c.say("started %s", "x\x1b]0;title\x07")
	if got, want := out.String(), "spanneremu | query \\x1b[2J\\x1b[H done\ndevstack   | started x\\x1b]0;title\\x07\n"; got != want {
		t.Errorf("terminal got %q, want %q", got, want)
	}
	tl := &tail{n: 2}
	tl.add("\x1b[31mred")
	if got := tl.get(); len(got) != 1 || got[0] != `\x1b[31mred` {
		t.Errorf("tail = %q, want the ESC escaped", got)
	}
}
