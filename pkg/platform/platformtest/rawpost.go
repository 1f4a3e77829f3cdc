package platformtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// RawRequest is a request written byte by byte, for requests an http.Client would refuse to send: a
// Content-Length that does not match the body (ShortBy bytes more than it sends: the client gives
// up), any headers.
type RawRequest struct {
	Method  string // "" is POST
	Path    string
	Header  map[string]string
	Body    string
	ShortBy int
}

// RawPost sends r (a POST unless r.Method says otherwise) to the server at base (a URL) on a
// connection of its own and returns the answer's status, header and body. The request is written
// while the answer is read: a server that refuses a huge body answers before it has read all of it
// and then closes, and a client still writing would see the connection reset before it read the
// answer.
func RawPost(t testing.TB, base string, r RawRequest) (int, http.Header, []byte) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close\r\n", method, r.Path, u.Host, len(r.Body)+r.ShortBy)
	for k, v := range r.Header {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	req.WriteString("\r\n" + r.Body)
	written := make(chan error, 1)
	go func() {
		_, err := io.WriteString(conn, req.String())
		if err == nil && r.ShortBy > 0 {
			err = conn.(*net.TCPConn).CloseWrite() // the body never arrives in full
		}
		written <- err
	}()
	conn.SetReadDeadline(time.Now().Add(Timeout)) // a hung server fails the test, not the run
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read the answer: %v (writing the request: %v)", err, <-written)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}
