// Package mailer sends one e-mail over SMTP (net/smtp) and says how the mail server answered:
// accepted (with its reply, which usually names its queue id), refused for the address (a bounce:
// 5xx to RCPT TO or to the message), or failed in a way another attempt may fix (4xx, a connection
// or TLS error, a 5xx to anything but the address). It also composes the message (Compose):
// MIME multipart/alternative with a text and an HTML part, UTF-8, quoted-printable, and an RFC
// 2047-encoded Subject, so that Japanese survives every hop.
//
// A session is kept for the next e-mail once its message is accepted (Config.MaxIdle,
// IdleTimeout, MaxMessages): connecting, the greeting, EHLO, STARTTLS's handshake and AUTH are
// done once per session, not per e-mail. A kept session the server has closed meanwhile is found
// at its first command, before anything of the e-mail is sent, and the e-mail goes through a new
// one. To a server that offers PIPELINING (RFC 2920), MAIL FROM, RCPT TO and DATA go in one write:
// an e-mail takes two round trips, not four.
//
// Transport security (Config.StartTLS): auto upgrades with STARTTLS when the server offers it,
// always refuses a server that does not, never stays in plain text. Credentials (PLAIN) are sent
// only over TLS or to localhost (net/smtp refuses otherwise), and the password never appears in an
// error or a log.
package mailer

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// StartTLS says whether a connection is upgraded to TLS.
type StartTLS string

const (
	StartTLSAuto   StartTLS = "auto"   // when the server offers it
	StartTLSAlways StartTLS = "always" // a server that does not offer it is an error
	StartTLSNever  StartTLS = "never"
)

// Config configures a Sender.
type Config struct {
	Addr string        // host:port of the mail server (relay)
	From *mail.Address // the From header and the envelope sender
	// Username and Password, when set, authenticate with PLAIN: over TLS, or to localhost only.
	Username, Password string
	StartTLS           StartTLS      // default auto
	Timeout            time.Duration // one e-mail's send (connecting too, without a kept session); default 30s
	LocalName          string        // the EHLO name; default "localhost"
	TLSConfig          *tls.Config   // nil: the system's roots, ServerName = Addr's host
	// Sessions kept for the next e-mails: at most MaxIdle at once (default 4; < 0 keeps none),
	// each for at most IdleTimeout unused (default 5s, well within the 5 minutes RFC 5321 lets a
	// server wait for a command; a relay that closes sooner costs a reconnect, not an e-mail) and
	// MaxMessages e-mails (default 100: relays limit the messages per connection).
	MaxIdle     int
	IdleTimeout time.Duration
	MaxMessages int
}

// Sender sends e-mails through one mail server. It is safe for concurrent use.
type Sender struct {
	cfg  Config
	host string

	mu   sync.Mutex
	idle []*session // ready for the next MAIL FROM, the most recently used last
}

// session is an SMTP session past its greeting, EHLO, STARTTLS and AUTH.
type session struct {
	conn net.Conn
	c    *smtp.Client
	sent int       // e-mails accepted through it
	used time.Time // when its last e-mail was accepted
}

// New returns a sender.
func New(cfg Config) (*Sender, error) {
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil || host == "" {
		return nil, fmt.Errorf("mailer: address %q is not host:port", cfg.Addr)
	}
	if cfg.From == nil || cfg.From.Address == "" {
		return nil, errors.New("mailer: a From address is required")
	}
	switch cfg.StartTLS {
	case "":
		cfg.StartTLS = StartTLSAuto
	case StartTLSAuto, StartTLSAlways, StartTLSNever:
	default:
		return nil, fmt.Errorf("mailer: StartTLS %q is not auto, always or never", cfg.StartTLS)
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, errors.New("mailer: a username needs a password and a password a username")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.LocalName == "" {
		cfg.LocalName = "localhost"
	}
	if cfg.MaxIdle == 0 {
		cfg.MaxIdle = 4
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Second
	}
	if cfg.MaxMessages <= 0 {
		cfg.MaxMessages = 100
	}
	if cfg.TLSConfig == nil {
		cfg.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if cfg.TLSConfig.ServerName == "" {
		cfg.TLSConfig = cfg.TLSConfig.Clone()
		cfg.TLSConfig.ServerName = host
	}
	return &Sender{cfg: cfg, host: host}, nil
}

// Message is one e-mail to one recipient.
type Message struct {
	To        string // a bare address
	Subject   string // one line, any Unicode
	Text      string // the text/plain part
	HTML      string // the text/html part
	MessageID string // with angle brackets, e.g. "<id@host>"
	Date      time.Time
	// Headers are extra header fields, written in this order (names and values printable ASCII).
	Headers []Header
}

// Header is one header field.
type Header struct{ Name, Value string }

// Stages of a send, as Error.Stage names them.
const (
	StageConnect  = "connect"  // dial and the server's greeting
	StageHello    = "hello"    // EHLO
	StageStartTLS = "starttls" // STARTTLS and the handshake
	StageAuth     = "auth"
	StageMail     = "mail" // MAIL FROM
	StageRcpt     = "rcpt" // RCPT TO
	StageData     = "data" // DATA and the message
)

// Error is a send that did not end in the server's acceptance.
type Error struct {
	Stage string // one of the Stage constants
	Code  int    // the server's reply code; 0 when it did not answer (connection, TLS, a local check)
	Err   error
}

func (e *Error) Error() string { return "smtp " + e.Stage + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Bounce reports whether the server refused the recipient or the message for good: a 5xx reply to
// RCPT TO or DATA. Sending again cannot help. Anything else (4xx, no answer, a 5xx to the
// greeting, EHLO, AUTH or MAIL FROM, which are about this sender's setup) may pass another time.
func (e *Error) Bounce() bool {
	return e.Code >= 500 && e.Code < 600 && (e.Stage == StageRcpt || e.Stage == StageData)
}

// IsBounce reports whether err is an *Error that bounced.
func IsBounce(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Bounce()
}

// Receipt is the server's acceptance of a message.
type Receipt struct {
	Reply string // its reply to the end of the message, e.g. "2.0.0 Ok: queued as 4BQ1"
}

// Send composes m and hands it to the mail server, through a kept session or a new one, bounded
// by Config.Timeout and ctx. A nil error means the server took responsibility for the message.
func (s *Sender) Send(ctx context.Context, m Message) (Receipt, error) {
	raw, err := Compose(s.cfg.From, m)
	if err != nil {
		return Receipt{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if se := s.take(); se != nil {
		r, err := s.transact(ctx, se, m.To, raw)
		if !stale(err) {
			return r, err
		}
		// The server closed the session while it was kept: nothing of m was sent.
	}
	se, err := s.open(ctx)
	if err != nil {
		return Receipt{}, err
	}
	return s.transact(ctx, se, m.To, raw)
}

// Close ends the kept sessions (QUIT). Sends after it open sessions of their own again.
func (s *Sender) Close() error {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	for _, se := range idle {
		se.conn.SetDeadline(time.Now().Add(time.Second))
		se.c.Quit()
		se.conn.Close()
	}
	return nil
}

// take returns the most recently used kept session, after closing the ones kept past
// IdleTimeout (the oldest first: idle is in the order of use); nil when there is none.
func (s *Sender) take() *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.idle) > 0 && time.Since(s.idle[0].used) >= s.cfg.IdleTimeout {
		s.idle[0].conn.Close()
		s.idle = s.idle[1:]
	}
	if len(s.idle) == 0 {
		return nil
	}
	se := s.idle[len(s.idle)-1]
	s.idle = s.idle[:len(s.idle)-1]
	return se
}

// keep keeps se for the next e-mail, without a deadline until a send takes it, or ends it (QUIT,
// still under the send's deadline) when it has sent its MaxMessages or MaxIdle are kept already.
func (s *Sender) keep(se *session) {
	se.used = time.Now()
	s.mu.Lock()
	kept := se.sent < s.cfg.MaxMessages && len(s.idle) < s.cfg.MaxIdle
	if kept {
		se.conn.SetDeadline(time.Time{})
		s.idle = append(s.idle, se)
	}
	s.mu.Unlock()
	if !kept {
		se.c.Quit() // the message is accepted: how the session ends changes nothing
		se.conn.Close()
	}
}

// open connects, reads the greeting, and says EHLO, STARTTLS and AUTH as configured.
func (s *Sender) open(ctx context.Context) (*session, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return nil, &Error{Stage: StageConnect, Err: err}
	}
	ok := false
	defer func() {
		if !ok {
			conn.Close()
		}
	}()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	// A cancelled request (the caller went away) ends the session at once.
	defer context.AfterFunc(ctx, func() { conn.Close() })()

	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		return nil, stageError(StageConnect, err)
	}
	if err := c.Hello(s.cfg.LocalName); err != nil {
		return nil, stageError(StageHello, err)
	}
	if err := s.startTLS(c); err != nil {
		return nil, err
	}
	if s.cfg.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return nil, &Error{Stage: StageAuth, Err: errors.New("the server offers no AUTH, and credentials are configured")}
		}
		// PlainAuth refuses to send the password over an unencrypted connection to anything but
		// localhost.
		if err := c.Auth(smtp.PlainAuth("", s.cfg.Username, s.cfg.Password, s.host)); err != nil {
			return nil, stageError(StageAuth, err)
		}
	}
	ok = true
	// Once STARTTLS has wrapped conn, its deadlines and closing still reach the TLS connection.
	return &session{conn: conn, c: c}, nil
}

// transact sends one e-mail through se: MAIL FROM, RCPT TO, DATA (pipelined where the server
// offers it, see envelope). The session is kept once the message is accepted, and ended otherwise.
func (s *Sender) transact(ctx context.Context, se *session, to string, raw []byte) (Receipt, error) {
	deadline, _ := ctx.Deadline()
	se.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { se.conn.Close() })
	reply, err := func() (string, error) {
		if stage, err := envelope(se.c, s.cfg.From.Address, to); err != nil {
			return "", stageError(stage, err)
		}
		reply, err := sendMessage(se.c, raw)
		if err != nil {
			return "", stageError(StageData, err)
		}
		return reply, nil
	}()
	if err != nil {
		stop()
		se.conn.Close() // a refusal leaves a transaction open: the session is not worth an RSET
		return Receipt{}, err
	}
	if stop() {
		se.sent++
		s.keep(se)
	} // else ctx ended as the reply came: the connection is closed, the message accepted
	return Receipt{Reply: reply}, nil
}

// stale reports whether err is a kept session's failure at its first command because the server
// had closed it: the connection gone, or 421 (the server closing the channel).
func stale(err error) bool {
	var e *Error
	if !errors.As(err, &e) || e.Stage != StageMail {
		return false
	}
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code == 421
	}
	return true
}

func (s *Sender) startTLS(c *smtp.Client) error {
	if s.cfg.StartTLS == StartTLSNever {
		return nil
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		if s.cfg.StartTLS == StartTLSAlways {
			return &Error{Stage: StageStartTLS, Err: errors.New("the server does not offer STARTTLS (SMTP_STARTTLS=always)")}
		}
		return nil
	}
	if err := c.StartTLS(s.cfg.TLSConfig); err != nil {
		return stageError(StageStartTLS, err)
	}
	return nil
}

// envelope starts a mail transaction: MAIL FROM, RCPT TO and DATA, up to the server's 354. To a
// server that offers PIPELINING (RFC 2920) the three go in one write and their replies are read
// in order: one round trip where three were. It returns the stage of a command that failed. A
// failure leaves the transaction open, and the caller closes the session (RFC 2920 has the client
// send an empty message after an accepted DATA; a closed connection ends the transaction as well).
func envelope(c *smtp.Client, from, to string) (stage string, err error) {
	if ok, _ := c.Extension("PIPELINING"); !ok {
		if err := c.Mail(from); err != nil {
			return StageMail, err
		}
		if err := c.Rcpt(to); err != nil {
			return StageRcpt, err
		}
		id, err := c.Text.Cmd("DATA")
		if err != nil {
			return StageData, err
		}
		c.Text.StartResponse(id)
		defer c.Text.EndResponse(id)
		if _, _, err := c.Text.ReadResponse(354); err != nil {
			return StageData, err
		}
		return "", nil
	}
	// What net/smtp's Mail and Rcpt check and add.
	if strings.ContainsAny(from, "\r\n") {
		return StageMail, errors.New("smtp: A line must not contain CR or LF")
	}
	if strings.ContainsAny(to, "\r\n") {
		return StageRcpt, errors.New("smtp: A line must not contain CR or LF")
	}
	params := ""
	if ok, _ := c.Extension("8BITMIME"); ok {
		params += " BODY=8BITMIME"
	}
	if ok, _ := c.Extension("SMTPUTF8"); ok {
		params += " SMTPUTF8"
	}
	fmt.Fprintf(c.Text.W, "MAIL FROM:<%s>%s\r\nRCPT TO:<%s>\r\nDATA\r\n", from, params, to)
	if err := c.Text.W.Flush(); err != nil {
		return StageMail, err
	}
	for _, r := range []struct {
		stage string
		code  int
	}{{StageMail, 250}, {StageRcpt, 25}, {StageData, 354}} { // RCPT: 250 or 251
		if _, _, err := c.Text.ReadResponse(r.code); err != nil {
			return r.stage, err
		}
	}
	return "", nil
}

// sendMessage sends the message after DATA's 354 and returns the server's reply to it (its queue id,
// which net/smtp's Data discards).
func sendMessage(c *smtp.Client, raw []byte) (string, error) {
	w := c.Text.DotWriter()
	if _, err := w.Write(raw); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	_, reply, err := c.Text.ReadResponse(250)
	return reply, err
}

func stageError(stage string, err error) *Error {
	e := &Error{Stage: stage, Err: err}
	var te *textproto.Error
	if errors.As(err, &te) {
		e.Code = te.Code
	}
	return e
}

// Compose writes m as an RFC 5322 message from from: multipart/alternative with the text part
// first (the fallback) and the HTML part last (the preferred), both UTF-8 and quoted-printable,
// lines ending in CRLF. It is deterministic (the boundary derives from the Message-ID), so every
// attempt to send m sends the same bytes.
func Compose(from *mail.Address, m Message) ([]byte, error) {
	if _, err := mail.ParseAddress(m.To); err != nil {
		return nil, fmt.Errorf("mailer: recipient: %w", err)
	}
	if !strings.HasPrefix(m.MessageID, "<") || !strings.HasSuffix(m.MessageID, ">") || !printable(m.MessageID) {
		return nil, fmt.Errorf("mailer: Message-ID %q is not <id>", m.MessageID)
	}
	for _, h := range m.Headers {
		if !token(h.Name) || !printable(h.Value) {
			return nil, fmt.Errorf("mailer: header %q: name or value is not printable ASCII", h.Name)
		}
	}
	sum := sha256.Sum256([]byte(m.MessageID))
	boundary := "spanmart-" + hex.EncodeToString(sum[:16])

	var b strings.Builder
	header := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	header("Date", m.Date.Format(time.RFC1123Z))
	header("From", from.String())
	header("To", (&mail.Address{Address: m.To}).String())
	header("Subject", encodeSubject(m.Subject))
	header("Message-ID", m.MessageID)
	header("MIME-Version", "1.0")
	// RFC 3834: no vacation auto-replies to a machine's message.
	header("Auto-Submitted", "auto-generated")
	for _, h := range m.Headers {
		header(h.Name, h.Value)
	}
	header("Content-Type", "multipart/alternative;\r\n boundary=\""+boundary+"\"")
	b.WriteString("\r\n")
	for _, p := range []struct{ mediaType, body string }{{"text/plain", m.Text}, {"text/html", m.HTML}} {
		b.WriteString("--" + boundary + "\r\n")
		header("Content-Type", p.mediaType+"; charset=UTF-8")
		header("Content-Transfer-Encoding", "quoted-printable")
		b.WriteString("\r\n")
		qp := quotedprintable.NewWriter(&b)
		if _, err := qp.Write([]byte(crlf(p.body))); err != nil {
			return nil, err
		}
		if err := qp.Close(); err != nil {
			return nil, err
		}
		b.WriteString("\r\n")
	}
	b.WriteString("--" + boundary + "--\r\n")
	return []byte(b.String()), nil
}

// encodeSubject returns s as a header value: as it is when it is printable ASCII, else RFC 2047
// encoded words (base64 UTF-8, how Japanese mail is usually written), each on its own folded line
// and short enough that no line of the header outgrows 78 characters.
func encodeSubject(s string) string {
	if printable(s) {
		return s
	}
	// "Subject: " + "=?UTF-8?B?" + base64 of 42 bytes (56) + "?=" is 77 characters.
	const maxBytes = 42
	var words []string
	for len(s) > 0 {
		n := min(len(s), maxBytes)
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n-- // never split a character between two words
		}
		words = append(words, "=?UTF-8?B?"+base64.StdEncoding.EncodeToString([]byte(s[:n]))+"?=")
		s = s[n:]
	}
	return strings.Join(words, "\r\n ")
}

// crlf makes every line end in CRLF.
func crlf(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return s != ""
}

func token(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' || s[i] == ':' {
			return false
		}
	}
	return s != ""
}
