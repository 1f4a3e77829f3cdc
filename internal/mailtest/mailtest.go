// Package mailtest is a real SMTP server for tests: it listens on 127.0.0.1 (a free port), speaks
// SMTP through github.com/emersion/go-smtp, and keeps every message it accepts in memory, so that a
// test of services/notifications, or the end-to-end harness, sees exactly what a mail relay would
// have been handed, over TCP, through the service's production SMTP client.
//
// Besides accepting, it fails on demand, the two ways a relay does:
//
//   - RejectRecipient(addr, code): RCPT TO for addr is answered code: a 5xx makes the address
//     bounce, a 4xx defers it (greylisting, a full mailbox); code 0 accepts it again.
//   - Refuse(n): the next n connections are answered "421 service not available" and closed
//     before the SMTP dialogue starts (an overloaded or restarting relay); n < 0 refuses every
//     connection until Refuse(0).
//
// Wait blocks until a matching message has arrived (no polling), so a test waits for an e-mail
// the way it waits for any other event:
//
//	srv, err := mailtest.Start()
//	...
//	defer srv.Close()
//	msg, err := srv.Wait(ctx, mailtest.To("ali@example.com"))
//	subject, err := msg.Subject() // RFC 2047 decoded
//	html, err := msg.Part("text/html")
//
// There is no TLS and no AUTH: the server is for 127.0.0.1 only.
package mailtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Message is one message the server accepted.
type Message struct {
	From   string      // envelope sender (MAIL FROM)
	To     []string    // envelope recipients (RCPT TO), as given
	Header mail.Header // the message's header, parsed (values still RFC 2047 encoded)
	Raw    []byte      // the message as received (header and body), dot-stuffing removed
	At     time.Time   // when it was accepted
}

// Subject returns the Subject header, RFC 2047 decoded.
func (m Message) Subject() (string, error) {
	return new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
}

// MessageID returns the Message-ID header, angle brackets included.
func (m Message) MessageID() string { return m.Header.Get("Message-Id") }

// Part returns the decoded body of the first part of type mediaType ("text/plain", "text/html"):
// the whole body for a single-part message of that type, else the matching part of a multipart
// one (nested multiparts included). Quoted-printable and base64 transfer encodings are decoded;
// the charset is assumed to be UTF-8. A message with no such part is an error.
func (m Message) Part(mediaType string) (string, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(m.Raw))
	if err != nil {
		return "", err
	}
	body, ok, err := findPart(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body, mediaType)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("mailtest: message %s has no %s part", m.MessageID(), mediaType)
	}
	return body, nil
}

func findPart(contentType, encoding string, body io.Reader, want string) (string, bool, error) {
	if contentType == "" {
		contentType = "text/plain"
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "", false, fmt.Errorf("mailtest: Content-Type %q: %w", contentType, err)
	}
	if strings.HasPrefix(mt, "multipart/") {
		r := multipart.NewReader(body, params["boundary"])
		for {
			p, err := r.NextRawPart()
			if errors.Is(err, io.EOF) {
				return "", false, nil
			}
			if err != nil {
				return "", false, err
			}
			// Raw, so that quoted-printable is decoded below like base64, whatever the part's case.
			s, ok, err := findPart(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p, want)
			if err != nil || ok {
				return s, ok, err
			}
		}
	}
	if mt != want {
		return "", false, nil
	}
	b, err := io.ReadAll(decoder(encoding, body))
	if err != nil {
		return "", false, fmt.Errorf("mailtest: %s part: %w", want, err)
	}
	return string(b), true, nil
}

func decoder(encoding string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, newlineStripper{r})
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	}
	return r
}

// To matches a message with an envelope recipient addr (case-insensitive), for Wait.
func To(addr string) func(Message) bool {
	return func(m Message) bool {
		for _, to := range m.To {
			if strings.EqualFold(to, addr) {
				return true
			}
		}
		return false
	}
}

// Server is the SMTP server. Its methods are safe for concurrent use.
type Server struct {
	smtp *smtp.Server
	ln   net.Listener
	done chan struct{} // closed when Serve returned

	mu       sync.Mutex
	messages []Message
	arrived  chan struct{} // closed and replaced whenever a message is stored
	rejected map[string]int
	refuse   int        // connections still to refuse; < 0: all
	conns    []net.Conn // the connections accepted for a dialogue, open or not
}

// Start starts a server on a free port of 127.0.0.1.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mailtest: listen: %w", err)
	}
	s := &Server{ln: ln, done: make(chan struct{}), arrived: make(chan struct{}), rejected: map[string]int{}}
	s.smtp = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{srv: s}, nil }))
	s.smtp.Domain = "mailtest.localhost"
	s.smtp.ErrorLog = log.New(io.Discard, "", 0)
	s.smtp.ReadTimeout, s.smtp.WriteTimeout = time.Minute, time.Minute
	go func() {
		defer close(s.done)
		s.smtp.Serve(&refusingListener{Listener: ln, srv: s})
	}()
	return s, nil
}

// Addr is the host:port the server listens on (SMTP_ADDR of the service under test).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server and closes every open connection.
func (s *Server) Close() error {
	err := s.smtp.Close()
	<-s.done
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Messages returns the messages accepted so far, oldest first.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Wait returns the first accepted message match accepts (one already received, or the next to
// arrive), or ctx's error once ctx is done.
func (s *Server) Wait(ctx context.Context, match func(Message) bool) (Message, error) {
	seen := 0
	for {
		s.mu.Lock()
		for ; seen < len(s.messages); seen++ {
			if m := s.messages[seen]; match(m) {
				s.mu.Unlock()
				return m, nil
			}
		}
		arrived := s.arrived
		s.mu.Unlock()
		select {
		case <-arrived:
		case <-ctx.Done():
			return Message{}, fmt.Errorf("mailtest: no matching message among %d: %w", seen, ctx.Err())
		}
	}
}

// RejectRecipient makes RCPT TO:<addr> (case-insensitive) answer code: 500..599 bounce the
// address, 400..499 defer it; 0 accepts it again.
func (s *Server) RejectRecipient(addr string, code int) {
	if code != 0 && (code < 400 || code > 599) {
		panic(fmt.Sprintf("mailtest: RejectRecipient code %d is not 4xx or 5xx", code))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == 0 {
		delete(s.rejected, strings.ToLower(addr))
		return
	}
	s.rejected[strings.ToLower(addr)] = code
}

// Refuse makes the next n connections be answered "421" and closed before the SMTP dialogue; n < 0
// refuses every connection until Refuse(0).
func (s *Server) Refuse(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = n
}

// Connections is how many connections the server has accepted for an SMTP dialogue (refused
// ones not counted).
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// DropConnections closes every connection accepted so far, as a relay does with sessions left
// idle past its timeout; the server goes on accepting new ones.
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

// refusing reports whether the connection just accepted is to be refused, counting it.
func (s *Server) refusing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.refuse == 0:
		return false
	case s.refuse > 0:
		s.refuse--
	}
	return true
}

func (s *Server) rejection(addr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected[strings.ToLower(addr)]
}

func (s *Server) store(m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = append(s.messages, m)
	close(s.arrived)
	s.arrived = make(chan struct{})
}

// refusingListener answers the connections the server refuses with 421 itself, as a relay that
// is shutting down or overloaded does before any SMTP dialogue.
type refusingListener struct {
	net.Listener
	srv *Server
}

func (l *refusingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return c, err
		}
		if !l.srv.refusing() {
			l.srv.mu.Lock()
			l.srv.conns = append(l.srv.conns, c)
			l.srv.mu.Unlock()
			return c, nil
		}
		c.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(c, "421 4.3.2 mailtest: service not available, try again later\r\n")
		c.Close()
	}
}

// session is one SMTP connection's mail transaction.
type session struct {
	srv  *Server
	from string
	to   []string
}

func (se *session) Mail(from string, _ *smtp.MailOptions) error {
	se.from = from
	return nil
}

func (se *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if code := se.srv.rejection(to); code != 0 {
		msg := "mailbox unavailable"
		if code < 500 {
			msg = "mailbox temporarily unavailable, try again later"
		}
		return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCodeNotSet, Message: "mailtest: <" + to + ">: " + msg}
	}
	se.to = append(se.to, to)
	return nil
}

func (se *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "mailtest: unparsable message header: " + err.Error()}
	}
	se.srv.store(Message{From: se.from, To: append([]string(nil), se.to...), Header: msg.Header, Raw: raw, At: time.Now()})
	return nil
}

func (se *session) Reset() { se.from, se.to = "", nil }

func (se *session) Logout() error { return nil }

// newlineStripper drops CR and LF, which base64 bodies carry every 76 characters.
type newlineStripper struct{ r io.Reader }

func (n newlineStripper) Read(p []byte) (int, error) {
	for {
		k, err := n.r.Read(p)
		j := 0
		for _, b := range p[:k] {
			if b != '\r' && b != '\n' {
				p[j] = b
				j++
			}
		}
		if j > 0 || err != nil {
			return j, err
		}
	}
}
