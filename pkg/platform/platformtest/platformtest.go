// Package platformtest helps test code built on package platform: captured JSON logs, a run
// function started in the background and stopped by cancelling its context, and polling an
// HTTP endpoint until it answers as expected (tests never sleep for correctness).
package platformtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/spanmart/spanmart/pkg/platform"
)

// Timeout bounds every wait in this package.
const Timeout = 30 * time.Second

// Getenv returns a getenv function reading vars.
func Getenv(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// Logs is a concurrency-safe log sink holding JSON lines.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// Entries decodes every line written so far.
func (l *Logs) Entries(t testing.TB) []map[string]any {
	t.Helper()
	l.mu.Lock()
	data := l.buf.String()
	l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		out = append(out, m)
	}
	return out
}

// Find returns the first entry whose message is message, waiting for it: some lines (the access
// log) are written after the response has been sent.
func (l *Logs) Find(t testing.TB, message string) map[string]any {
	t.Helper()
	return l.FindFunc(t, "log line "+message, func(e map[string]any) bool { return e["message"] == message })
}

// FindFunc returns the first entry match accepts, waiting for it.
func (l *Logs) FindFunc(t testing.TB, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	var got map[string]any
	Eventually(t, what, func() bool {
		for _, e := range l.Entries(t) {
			if match(e) {
				got = e
				return true
			}
		}
		return false
	})
	return got
}

// NewLogger returns a debug-level platform logger writing to the returned Logs.
func NewLogger(t testing.TB, service string) (*zap.Logger, *Logs) {
	t.Helper()
	logs := &Logs{}
	log, err := platform.NewLogger(logs, platform.LogOptions{Service: service, Version: "test", Level: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	return log, logs
}

// Eventually polls cond until it holds, failing the test after Timeout.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Listen returns a listener on a free loopback port, closed when the test ends.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// Running is a function started by Start.
type Running struct {
	cancel context.CancelFunc
	done   chan error
}

// Start runs fn in the background with a context that Stop (or the end of the test) cancels.
func Start(t testing.TB, fn func(ctx context.Context) error) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(Timeout):
			t.Errorf("run did not return within %s of cancellation", Timeout)
		}
	})
	return r
}

// Stop cancels the context and returns fn's result, failing the test if it takes over Timeout.
func (r *Running) Stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(Timeout):
		t.Fatalf("run did not return within %s of cancellation", Timeout)
		return nil
	}
}

// WaitStatus polls url with GET until it answers status and returns that response's body.
func WaitStatus(t testing.TB, url string, status int) []byte {
	t.Helper()
	var body []byte
	var last string
	deadline := time.Now().Add(Timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == status {
				return body
			}
			last = resp.Status + ": " + string(body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: want %d, last answer %s", url, status, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StartedURL waits for the "starting" line a binary logs once it listens and returns the base URL
// of its address on the loopback interface, so tests can run binaries with PORT=0.
func StartedURL(t testing.TB, logs *Logs) string {
	t.Helper()
	line := logs.Find(t, "starting")
	port, _ := line["port"].(float64)
	if port <= 0 {
		t.Fatalf("starting line has no port: %v", line)
	}
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
}

// mainEnv marks a re-executed test binary that should run main instead of the tests.
const mainEnv = "SPANMART_TEST_RUN_MAIN"

// IsMainProcess reports whether this test binary was started by StartMain or RunMain to act as the
// program itself; a TestMain then calls main instead of running tests:
//
//	func TestMain(m *testing.M) {
//		if platformtest.IsMainProcess() {
//			main()
//			os.Exit(0)
//		}
//		...
//	}
func IsMainProcess() bool { return os.Getenv(mainEnv) == "1" }

// mainCommand re-executes the test binary as the program, with env added to this process's.
func mainCommand(env []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), mainEnv+"=1"), env...)
	return cmd
}

// RunMain runs the program to completion and returns its combined output and exit code.
func RunMain(t testing.TB, env ...string) (output string, exitCode int) {
	t.Helper()
	out, err := mainCommand(env).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	default:
		t.Fatalf("run main: %v", err)
		return "", 0
	}
}

// Process is the program running as a child process.
type Process struct {
	Cmd  *exec.Cmd
	Logs *Logs // its standard output, JSON lines
	done chan error
}

// StartMain starts the program as a child process; it is killed when the test ends if still running.
func StartMain(t testing.TB, env ...string) *Process {
	t.Helper()
	p := &Process{Cmd: mainCommand(env), Logs: &Logs{}, done: make(chan error, 1)}
	p.Cmd.Stdout = p.Logs
	p.Cmd.Stderr = &lineLogger{t: t}
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.Cmd.Wait() }()
	t.Cleanup(func() {
		p.Cmd.Process.Kill()
		<-p.done
	})
	return p
}

// Signal sends sig and waits for the process to exit, returning its exit code.
func (p *Process) Signal(t testing.TB, sig os.Signal) (exitCode int) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(Timeout):
		t.Fatalf("process did not exit within %s of %v", Timeout, sig)
		return -1
	}
}

// lineLogger passes a child's standard error to the test log.
type lineLogger struct{ t testing.TB }

func (l *lineLogger) Write(p []byte) (int, error) {
	l.t.Logf("stderr: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}
