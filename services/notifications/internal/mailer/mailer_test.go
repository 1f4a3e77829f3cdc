package mailer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/spanmart/spanmart/internal/mailtest"
)

var from = &mail.Address{Name: "Spanmart", Address: "no-reply@spanmart.example"}

func message() Message {
	return Message{
		To: "ali@example.com",
		// Long enough for several encoded words.
		Subject:   "ご注文を承りました (注文番号 7f0c2a1e-3b4d-4e5f-8a9b-0c1d2e3f4a5b) ありがとうございます",
		Text:      "ご注文ありがとうございます。\n合計: ¥1,500\n" + strings.Repeat("長い行", 40) + "\n",
		HTML:      "<p>ご注文ありがとうございます。</p>\n<p>合計: ¥1,500</p>\n",
		MessageID: "<e-1.order_confirmed@notifications.spanmart>",
		Date:      time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Headers:   []Header{{Name: "X-Spanmart-Template", Value: "order_confirmed"}},
	}
}

func start(t *testing.T) *mailtest.Server {
	t.Helper()
	srv, err := mailtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func sender(t *testing.T, cfg Config) *Sender {
	t.Helper()
	if cfg.From == nil {
		cfg.From = from
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestComposeReadsBack(t *testing.T) {
	m := message()
	raw, err := Compose(from, m)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Compose(from, m)
	if !bytes.Equal(raw, again) {
		t.Error("Compose is not deterministic: a resend would differ")
	}
	for i, line := range strings.SplitAfter(string(raw), "\n") {
		if line != "" && !strings.HasSuffix(line, "\r\n") {
			t.Errorf("line %d does not end in CRLF: %q", i+1, line)
		}
		if len(line) > 78+2 {
			t.Errorf("line %d is %d bytes long: %q", i+1, len(line), line)
		}
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil || subject != m.Subject {
		t.Errorf("Subject decodes to %q (%v), want %q", subject, err, m.Subject)
	}
	for name, want := range map[string]string{
		"From": `"Spanmart" <no-reply@spanmart.example>`, "To": "<ali@example.com>", "Message-Id": m.MessageID,
		"Date": "Sat, 01 Mar 2025 12:00:00 +0000", "Mime-Version": "1.0", "X-Spanmart-Template": "order_confirmed",
		"Auto-Submitted": "auto-generated",
	} {
		if got := msg.Header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	got := mailtest.Message{Header: msg.Header, Raw: raw}
	if text, err := got.Part("text/plain"); err != nil || text != strings.ReplaceAll(m.Text, "\n", "\r\n") {
		t.Errorf("text part %q (%v)", text, err)
	}
	if html, err := got.Part("text/html"); err != nil || html != strings.ReplaceAll(m.HTML, "\n", "\r\n") {
		t.Errorf("HTML part %q (%v)", html, err)
	}
}

func TestComposeRefusesHeaderInjection(t *testing.T) {
	for name, change := range map[string]func(*Message){
		"recipient":  func(m *Message) { m.To = "ali@example.com\r\nBcc: eve@example.com" },
		"message id": func(m *Message) { m.MessageID = "<a@b>\r\nBcc: eve@example.com" },
		"header":     func(m *Message) { m.Headers = []Header{{Name: "X-A", Value: "1\r\nBcc: eve@example.com"}} },
	} {
		m := message()
		change(&m)
		if _, err := Compose(from, m); err == nil {
			t.Errorf("%s with a line break: composed", name)
		}
	}
}

func TestSend(t *testing.T) {
	srv := start(t)
	s := sender(t, Config{Addr: srv.Addr()})
	receipt, err := s.Send(context.Background(), message())
	if err != nil {
		t.Fatal(err)
	}
	if receipt.Reply == "" {
		t.Error("no reply from the server kept")
	}
	msgs := srv.Messages()
	if len(msgs) != 1 || msgs[0].From != from.Address || msgs[0].To[0] != "ali@example.com" {
		t.Fatalf("server got %+v", msgs)
	}
	want, _ := Compose(from, message())
	if !bytes.Equal(msgs[0].Raw, want) {
		t.Errorf("the server received other bytes than Compose writes:\n%s", msgs[0].Raw)
	}
}

func TestSendErrors(t *testing.T) {
	srv := start(t)
	srv.RejectRecipient("bounce@example.com", 550)
	srv.RejectRecipient("full@example.com", 452)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	for _, c := range []struct {
		name   string
		cfg    Config
		to     string
		before func()
		stage  string
		code   int
		bounce bool
	}{
		{name: "5xx to RCPT bounces", cfg: Config{Addr: srv.Addr()}, to: "bounce@example.com", stage: StageRcpt, code: 550, bounce: true},
		{name: "4xx to RCPT defers", cfg: Config{Addr: srv.Addr()}, to: "full@example.com", stage: StageRcpt, code: 452},
		{name: "421 greeting", cfg: Config{Addr: srv.Addr()}, to: "ali@example.com", before: func() { srv.Refuse(1) }, stage: StageConnect, code: 421},
		{name: "nobody listening", cfg: Config{Addr: closed.Addr().String()}, to: "ali@example.com", stage: StageConnect},
		{name: "STARTTLS required, not offered", cfg: Config{Addr: srv.Addr(), StartTLS: StartTLSAlways}, to: "ali@example.com", stage: StageStartTLS},
		{name: "credentials, no AUTH offered", cfg: Config{Addr: srv.Addr(), Username: "u", Password: "secret-pw"}, to: "ali@example.com", stage: StageAuth},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.before != nil {
				c.before()
			}
			m := message()
			m.To = c.to
			_, err := sender(t, c.cfg).Send(context.Background(), m)
			var e *Error
			if !errors.As(err, &e) || e.Stage != c.stage || e.Code != c.code || e.Bounce() != c.bounce || IsBounce(err) != c.bounce {
				t.Fatalf("Send: %#v (%v); want stage %s, code %d, bounce %v", err, err, c.stage, c.code, c.bounce)
			}
			if strings.Contains(err.Error(), "secret-pw") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
	if n := len(srv.Messages()); n != 0 {
		t.Errorf("%d messages accepted, want none", n)
	}
}

func TestSendGivesUpAtTheTimeout(t *testing.T) {
	// A server that accepts the connection and never greets.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, err = sender(t, Config{Addr: ln.Addr().String(), Timeout: 100 * time.Millisecond}).Send(context.Background(), message())
	var e *Error
	if !errors.As(err, &e) || e.Stage != StageConnect || e.Bounce() {
		t.Errorf("Send to a silent server: %v, want a connect error that is no bounce", err)
	}
}

// authServer is a server offering AUTH PLAIN without TLS (go-smtp's AllowInsecureAuth), on addr,
// recording the passwords it is sent.
func authServer(t *testing.T, addr string) (hostport string, passwords func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	var mu sync.Mutex
	var got []string
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &authSession{record: func(pw string) { mu.Lock(); got = append(got, pw); mu.Unlock() }}, nil
	}))
	srv.AllowInsecureAuth = true
	srv.Domain = "auth.test"
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

type authSession struct{ record func(string) }

func (s *authSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *authSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, _, password string) error { s.record(password); return nil }), nil
}
func (s *authSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *authSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *authSession) Data(r io.Reader) error               { _, err := io.Copy(io.Discard, r); return err }
func (s *authSession) Reset()                               {}
func (s *authSession) Logout() error                        { return nil }

// The password goes to localhost in plain text (a local relay), but to nothing else without TLS.
func TestCredentialsNeedTLSUnlessLocalhost(t *testing.T) {
	local, localPasswords := authServer(t, "127.0.0.1:0")
	if _, err := sender(t, Config{Addr: local, Username: "u", Password: "pw-local"}).Send(context.Background(), message()); err != nil {
		t.Fatalf("send with credentials to 127.0.0.1: %v", err)
	}
	if got := localPasswords(); len(got) != 1 || got[0] != "pw-local" {
		t.Errorf("the local server was sent passwords %q", got)
	}

	// 127.0.0.2 is the loopback interface too on Linux, but net/smtp does not count it as localhost.
	remote, remotePasswords := authServer(t, "127.0.0.2:0")
	_, err := sender(t, Config{Addr: remote, Username: "u", Password: "pw-remote"}).Send(context.Background(), message())
	var e *Error
	if !errors.As(err, &e) || e.Stage != StageAuth || strings.Contains(err.Error(), "pw-remote") {
		t.Errorf("send with credentials in plain text to %s: %v, want an auth error", remote, err)
	}
	if got := remotePasswords(); len(got) != 0 {
		t.Errorf("the password went over plain text: the server got %q", got)
	}
}

func TestNewRefusesBadConfigs(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no port":         {Addr: "smtp.example", From: from},
		"no from":         {Addr: "smtp.example:587"},
		"user, no secret": {Addr: "smtp.example:587", From: from, Username: "u"},
		"bad starttls":    {Addr: "smtp.example:587", From: from, StartTLS: "sometimes"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// sendTo sends message() to to through s, failing the test on an error.
func sendTo(t *testing.T, s *Sender, to string) {
	t.Helper()
	m := message()
	m.To = to
	if _, err := s.Send(context.Background(), m); err != nil {
		t.Fatalf("Send to %s: %v", to, err)
	}
}

// E-mails go through one kept session, one after the other; a session the server closed while it
// was kept is replaced without losing the e-mail; Close ends the kept session.
func TestSendKeepsTheSession(t *testing.T) {
	srv := start(t)
	s := sender(t, Config{Addr: srv.Addr()})
	sendTo(t, s, "a@example.com")
	sendTo(t, s, "b@example.com")
	if n := srv.Connections(); n != 1 {
		t.Errorf("two e-mails one after the other took %d connections, want 1", n)
	}
	srv.DropConnections()
	sendTo(t, s, "c@example.com")
	if n := srv.Connections(); n != 2 {
		t.Errorf("after the server closed the kept session: %d connections, want 2", n)
	}
	msgs := srv.Messages()
	if len(msgs) != 3 || msgs[0].To[0] != "a@example.com" || msgs[1].To[0] != "b@example.com" || msgs[2].To[0] != "c@example.com" {
		t.Fatalf("server got %+v, want the three e-mails once each", msgs)
	}
	s.Close()
	sendTo(t, s, "d@example.com")
	if n := srv.Connections(); n != 3 {
		t.Errorf("after Close: %d connections, want 3 (a new session)", n)
	}
}

// A session is not kept past IdleTimeout or MaxMessages, nor at all with MaxIdle < 0; a refused
// recipient ends it; concurrent sends keep at most MaxIdle.
func TestSendKeepsSessionsWithinBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want int // connections for three e-mails one after the other
	}{
		{name: "idle timeout", cfg: Config{IdleTimeout: time.Nanosecond}, want: 3},
		{name: "two e-mails per session", cfg: Config{MaxMessages: 2}, want: 2},
		{name: "none kept", cfg: Config{MaxIdle: -1}, want: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := start(t)
			c.cfg.Addr = srv.Addr()
			s := sender(t, c.cfg)
			for _, to := range []string{"a@example.com", "b@example.com", "c@example.com"} {
				sendTo(t, s, to)
			}
			if n := srv.Connections(); n != c.want {
				t.Errorf("%d connections, want %d", n, c.want)
			}
		})
	}
	t.Run("a bounce ends the session", func(t *testing.T) {
		srv := start(t)
		srv.RejectRecipient("bounce@example.com", 550)
		s := sender(t, Config{Addr: srv.Addr()})
		m := message()
		m.To = "bounce@example.com"
		if _, err := s.Send(context.Background(), m); !IsBounce(err) {
			t.Fatalf("Send to a refused recipient: %v, want a bounce", err)
		}
		sendTo(t, s, "a@example.com")
		if n := srv.Connections(); n != 2 {
			t.Errorf("%d connections, want 2", n)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		srv := start(t)
		s := sender(t, Config{Addr: srv.Addr(), MaxIdle: 2})
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for j := range 5 {
					sendTo(t, s, fmt.Sprintf("c%d-%d@example.com", i, j))
				}
			})
		}
		wg.Wait()
		if n := len(srv.Messages()); n != 40 {
			t.Errorf("%d e-mails accepted, want 40", n)
		}
		s.mu.Lock()
		kept := len(s.idle)
		s.mu.Unlock()
		if kept > 2 {
			t.Errorf("%d sessions kept, want at most MaxIdle 2", kept)
		}
		if n := srv.Connections(); n >= 40 {
			t.Errorf("%d connections for 40 e-mails: no session was reused", n)
		}
	})
}

// To a server that offers PIPELINING, MAIL FROM, RCPT TO and DATA go in one write; to one that
// does not, each waits for the reply to the one before (RFC 2920). The server here answers in
// lock step and records, at each MAIL FROM, whether the commands after it came with it. A refused
// recipient is the same bounce either way.
func TestSendPipelinesWhereOffered(t *testing.T) {
	for _, offered := range []bool{true, false} {
		t.Run(fmt.Sprintf("PIPELINING offered %v", offered), func(t *testing.T) {
			addr, ahead, accepted := lockStepServer(t, offered)
			s := sender(t, Config{Addr: addr, MaxIdle: -1})
			if _, err := s.Send(context.Background(), message()); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if got := ahead(); len(got) != 1 || got[0] != offered {
				t.Errorf("commands sent ahead of MAIL FROM's reply: %v, want [%v]", got, offered)
			}
			want, _ := Compose(from, message())
			if got := accepted(); len(got) != 1 || got[0] != string(want) {
				t.Errorf("the server accepted %d messages, want the one Compose writes", len(got))
			}
			m := message()
			m.To = "bounce@example.com"
			_, err := s.Send(context.Background(), m)
			var e *Error
			if !errors.As(err, &e) || e.Stage != StageRcpt || e.Code != 550 || !IsBounce(err) {
				t.Errorf("Send to a refused recipient: %v, want a bounce at RCPT (550)", err)
			}
			if n := len(accepted()); n != 1 {
				t.Errorf("%d messages accepted after the bounce, want 1", n)
			}
		})
	}
}

// lockStepServer is a minimal SMTP server on 127.0.0.1 that offers PIPELINING or not, refuses
// the recipient bounce@example.com (550), and answers each command before it reads the next. It
// returns its address, whether the commands after each MAIL FROM had arrived with it, and the
// messages it accepted.
func lockStepServer(t *testing.T, pipelining bool) (addr string, ahead func() []bool, accepted func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var (
		mu   sync.Mutex
		sent []bool
		msgs []string
	)
	serve := func(conn net.Conn) {
		defer conn.Close()
		r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
		reply := func(s string) { w.WriteString(s + "\r\n"); w.Flush() }
		reply("220 lockstep.test ESMTP")
		refused := false
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			cmd := strings.ToUpper(strings.TrimSpace(line))
			switch {
			case strings.HasPrefix(cmd, "EHLO"):
				if pipelining {
					reply("250-lockstep.test\r\n250 PIPELINING")
				} else {
					reply("250 lockstep.test")
				}
			case strings.HasPrefix(cmd, "MAIL FROM:"):
				mu.Lock()
				sent = append(sent, r.Buffered() > 0)
				mu.Unlock()
				refused = false
				reply("250 2.1.0 ok")
			case strings.HasPrefix(cmd, "RCPT TO:"):
				refused = strings.Contains(cmd, "BOUNCE@")
				if refused {
					reply("550 5.1.1 no such user")
				} else {
					reply("250 2.1.5 ok")
				}
			case cmd == "DATA" && refused:
				reply("554 5.5.1 no valid recipients")
			case cmd == "DATA":
				reply("354 go ahead")
				var b strings.Builder
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if l == ".\r\n" {
						break
					}
					b.WriteString(strings.TrimPrefix(l, "."))
				}
				mu.Lock()
				msgs = append(msgs, b.String())
				mu.Unlock()
				reply("250 2.0.0 queued as 1")
			case cmd == "QUIT":
				reply("221 bye")
				return
			default:
				reply("502 5.5.2 not implemented")
			}
		}
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(conn)
		}
	}()
	return ln.Addr().String(),
		func() []bool { mu.Lock(); defer mu.Unlock(); return append([]bool(nil), sent...) },
		func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), msgs...) }
}
