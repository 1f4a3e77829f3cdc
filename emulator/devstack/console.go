package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// console writes every process's output to the terminal, one line at a time with the process's name
// in front (colored on a terminal), and a copy without the prefix to STATE/logs/NAME.log. Lines are
// written whole under one lock, so output of concurrent processes never interleaves mid-line.
type console struct {
	mu    sync.Mutex
	out   io.Writer
	color bool
	// pretty shows the services' JSON log lines as "SEVERITY message key=value" (see prettyLog).
	pretty bool
	width  int                 // of the name column
	files  map[string]*os.File // log file per name
	colors map[string]string
}

// ANSI colors handed out to names in order; devstack's own lines are bold.
var palette = []string{"\x1b[36m", "\x1b[33m", "\x1b[32m", "\x1b[35m", "\x1b[34m", "\x1b[96m", "\x1b[93m", "\x1b[92m"}

// newConsole returns a console writing to out whose name column fits every name in names.
func newConsole(out *os.File, names ...string) *console {
	c := &console{
		out:    out,
		color:  isTerminal(out),
		pretty: true,
		width:  len("devstack"),
		files:  map[string]*os.File{},
		colors: map[string]string{"devstack": "\x1b[1m"},
	}
	for _, n := range names {
		c.width = max(c.width, len(n))
	}
	return c
}

// isTerminal reports whether f is a terminal that wants color (https://no-color.org).
func isTerminal(f *os.File) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// register reserves a column width and a color for name and opens its log file (appending: the log
// of a previous run stays above a separator line).
func (c *console) register(name, logPath string) error {
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", name, err)
	}
	fmt.Fprintf(f, "==== %s: devstack started %s ====\n", time.Now().UTC().Format(time.RFC3339), name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.files[name]; old != nil {
		old.Close()
	}
	c.files[name] = f
	c.width = max(c.width, len(name))
	if _, ok := c.colors[name]; !ok {
		c.colors[name] = palette[(len(c.colors)-1)%len(palette)]
	}
	return nil
}

// line writes one line of name's output.
func (c *console) line(name, text string) { c.write(name, text, text) }

// write shows display on the terminal (control characters escaped: see terminalSafe) and appends
// raw to name's log file.
func (c *console) write(name, display, raw string) {
	display = terminalSafe(display)
	c.mu.Lock()
	defer c.mu.Unlock()
	label := fmt.Sprintf("%-*s", c.width, name)
	if c.color {
		label = c.colors[name] + label + "\x1b[0m"
	}
	fmt.Fprintf(c.out, "%s | %s\n", label, display)
	if f := c.files[name]; f != nil {
		fmt.Fprintln(f, raw)
	}
}

// say writes one of the devstack's own lines.
func (c *console) say(format string, args ...any) {
	c.line("devstack", fmt.Sprintf(format, args...))
}

// raw writes text without a prefix (the summary table), to the terminal and devstack.log.
func (c *console) raw(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.out, text)
	if f := c.files["devstack"]; f != nil {
		io.WriteString(f, text)
	}
}

func (c *console) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.files {
		f.Close()
	}
	c.files = map[string]*os.File{}
}

// lineWriter is an io.Writer that cuts what a process writes into lines and hands each to emit.
// Carriage returns are dropped so that progress output does not garble the terminal.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(line string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
	// A process printing megabytes without a newline must not grow the buffer without bound.
	if len(w.buf) > 64<<10 {
		w.emit(string(w.buf))
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

// flush emits a final unterminated line.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(strings.TrimRight(string(w.buf), "\r"))
		w.buf = nil
	}
}

// tail keeps the last n lines of a process's output, printed when it fails.
type tail struct {
	mu    sync.Mutex
	n     int
	lines []string
}

// add keeps line, control characters escaped: the tail ends up on the terminal in an error.
func (t *tail) add(line string) {
	line = terminalSafe(line)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

func (t *tail) get() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}

// terminalSafe escapes what a terminal would act on instead of showing: C0 control characters
// other than tab (\n and \r as such, the rest as \x1b), DEL (\x7f), C1 control characters
// (U+0080–U+009F as \u009b; some terminals take them as ESC sequences) and bytes that are not
// UTF-8 (\x9b: the same C1 codes, sent raw). Whatever a process or a client put in a log line (a
// request path of "/%1b[2J", say) is then shown, not executed: no clearing the screen, moving the
// cursor, rewriting earlier lines or setting the window title. Backslashes are not escaped, so
// the function is idempotent and the output stays readable; the log files keep the bytes as
// written.
func terminalSafe(s string) string {
	i := 0
	for i < len(s) && (s[i] == '\t' || s[i] >= 0x20 && s[i] < 0x7f) {
		i++
	}
	if i == len(s) {
		return s // the common case: printable ASCII
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 && r != '\t', r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
