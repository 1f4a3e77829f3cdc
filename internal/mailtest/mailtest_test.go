package mailtest_test

import (
	"context"
	"errors"
	"net/smtp"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/spanmart/spanmart/internal/mailtest"
)

func start(t *testing.T) *mailtest.Server {
	t.Helper()
	srv, err := mailtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv
}

const message = "From: shop@spanmart.test\r\n" +
	"To: ali@example.com\r\n" +
	"Subject: =?UTF-8?B?44GU5rOo5paH44KS5om/44KK44G+44GX44Gf?=\r\n" +
	"Message-ID: <m-1@spanmart.test>\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/alternative; boundary=\"b\"\r\n" +
	"\r\n" +
	"--b\r\n" +
	"Content-Type: text/plain; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"=E3=81=82 caf=C3=A9\r\n" +
	"--b\r\n" +
	"Content-Type: text/html; charset=UTF-8\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"PHA+44GCPC9wPg==\r\n" +
	"--b--\r\n"

// send hands message to srv with the standard library's client, as any SMTP client would.
func send(srv *mailtest.Server, to string) error {
	return smtp.SendMail(srv.Addr(), nil, "shop@spanmart.test", []string{to}, []byte(message))
}

func code(err error) int {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

func TestAcceptsAndKeepsMessages(t *testing.T) {
	srv := start(t)
	if err := send(srv, "ali@example.com"); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.From != "shop@spanmart.test" || len(m.To) != 1 || m.To[0] != "ali@example.com" {
		t.Errorf("envelope from %q to %q", m.From, m.To)
	}
	if m.MessageID() != "<m-1@spanmart.test>" || !strings.Contains(string(m.Raw), "Content-Type: multipart/alternative") {
		t.Errorf("Message-ID %q; raw:\n%s", m.MessageID(), m.Raw)
	}
	if s, err := m.Subject(); err != nil || s != "ご注文を承りました" {
		t.Errorf("Subject() = %q, %v", s, err)
	}
	if s, err := m.Part("text/plain"); err != nil || s != "あ café" {
		t.Errorf(`Part("text/plain") = %q, %v`, s, err)
	}
	if s, err := m.Part("text/html"); err != nil || s != "<p>あ</p>" {
		t.Errorf(`Part("text/html") = %q, %v`, s, err)
	}
	if _, err := m.Part("image/png"); err == nil {
		t.Error(`Part("image/png") found a part that is not there`)
	}
}

func TestWaitBlocksUntilAMatchArrives(t *testing.T) {
	srv := start(t)
	if err := send(srv, "bob@example.com"); err != nil {
		t.Fatal(err)
	}
	got := make(chan mailtest.Message, 1)
	errs := make(chan error, 1)
	go func() {
		m, err := srv.Wait(context.Background(), mailtest.To("ALI@example.com"))
		got <- m
		errs <- err
	}()
	// Whether Wait starts before or after this send, it returns ali's message, not bob's.
	if err := send(srv, "ali@example.com"); err != nil {
		t.Fatal(err)
	}
	if m := <-got; len(m.To) != 1 || m.To[0] != "ali@example.com" {
		t.Errorf("Wait returned a message to %q", m.To)
	}
	if err := <-errs; err != nil {
		t.Error(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := srv.Wait(ctx, mailtest.To("nobody@example.com")); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context: %v", err)
	}
}

func TestRejectRecipient(t *testing.T) {
	srv := start(t)
	srv.RejectRecipient("Bounce@Example.com", 550)
	srv.RejectRecipient("later@example.com", 451)
	if err := send(srv, "bounce@example.com"); code(err) != 550 {
		t.Errorf("send to a rejected address: %v, want 550", err)
	}
	if err := send(srv, "later@example.com"); code(err) != 451 {
		t.Errorf("send to a deferred address: %v, want 451", err)
	}
	srv.RejectRecipient("later@example.com", 0)
	if err := send(srv, "later@example.com"); err != nil {
		t.Errorf("send after the rejection was lifted: %v", err)
	}
	if n := len(srv.Messages()); n != 1 {
		t.Errorf("%d messages kept, want 1 (refused ones are not)", n)
	}
}

func TestRefuse(t *testing.T) {
	srv := start(t)
	srv.Refuse(2)
	for i := 0; i < 2; i++ {
		if err := send(srv, "ali@example.com"); code(err) != 421 {
			t.Errorf("connection %d: %v, want 421", i+1, err)
		}
	}
	if err := send(srv, "ali@example.com"); err != nil {
		t.Errorf("third connection: %v", err)
	}
	srv.Refuse(-1)
	for i := 0; i < 3; i++ {
		if err := send(srv, "ali@example.com"); code(err) != 421 {
			t.Errorf("while refusing all, connection %d: %v, want 421", i+1, err)
		}
	}
	srv.Refuse(0)
	if err := send(srv, "ali@example.com"); err != nil {
		t.Errorf("after Refuse(0): %v", err)
	}
	if n := len(srv.Messages()); n != 2 {
		t.Errorf("%d messages, want 2", n)
	}
}

func TestCloseEndsOpenSessions(t *testing.T) {
	srv, err := mailtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	c, err := smtp.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("test"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a session was open")
	}
	if err := c.Noop(); err == nil {
		t.Error("the session survived Close")
	}
}
