package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

// TestCommand builds the command, waits for its ready line, uses it with stripe-go and stops it
// with SIGTERM.
func TestCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "paysim")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-port", "0", "-wallet-balances", "kim=700")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line after 30s")
	}
	m := regexp.MustCompile(`^paysim: ready on (http://127\.0\.0\.1:\d+)$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("ready line %q", line)
	}

	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{URL: stripe.String(m[1]), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}})
	c := stripe.NewClient("sk_test_cmd", stripe.WithBackends(backends))
	pi, err := c.V1PaymentIntents.Create(context.Background(), &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(1000), Currency: stripe.String("usd"), PaymentMethod: stripe.String("pm_card_visa"),
		CaptureMethod: stripe.String("manual"), Confirm: stripe.Bool(true),
	})
	if err != nil || pi.Status != stripe.PaymentIntentStatusRequiresCapture {
		t.Fatalf("Create = %v, %v", pi, err)
	}

	// The KOMOJU dialect, on the same port, with the wallets of -wallet-balances.
	for customer, want := range map[string]string{"kim": "captured", "ali": "failed"} {
		req, _ := http.NewRequest("POST", m[1]+"/api/v1/payments", strings.NewReader(
			`{"amount": 700, "currency": "JPY", "metadata": {"customer_id": "`+customer+`"}, "payment_details": {"type": "paypay"}}`))
		req.SetBasicAuth("sk_test_cmd", "")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p struct{ Status string }
		json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || p.Status != want {
			t.Errorf("PayPay payment of %s: status %d, %q; want %q", customer, resp.StatusCode, p.Status, want)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Output ends when the process exits; Wait only after reading it all.
	timeout := time.After(30 * time.Second)
	for {
		select {
		case extra, ok := <-lines:
			if ok {
				t.Errorf("more output after the ready line: %q", extra)
				continue
			}
		case <-timeout:
			t.Fatal("still running 30s after SIGTERM")
		}
		break
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
}

// TestCommandDataDir: with -data-dir a PaymentIntent outlives the process, and a file that is
// not a snapshot stops the command with an error naming it.
func TestCommandDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "paysim")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "paysim")
	ctx := context.Background()

	url, stop := runCommand(t, bin, "-port", "0", "-data-dir", dir)
	c := stripe.NewClient("sk_test_cmd", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL: stripe.String(url), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}})))
	pi, err := c.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(1000), Currency: stripe.String("jpy"), PaymentMethod: stripe.String("pm_card_visa"),
		CaptureMethod: stripe.String("manual"), Confirm: stripe.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop()

	url, stop = runCommand(t, bin, "-port", "0", "-data-dir", dir)
	c = stripe.NewClient("sk_test_cmd", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL: stripe.String(url), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}})))
	got, err := c.V1PaymentIntents.Retrieve(ctx, pi.ID, nil)
	if err != nil || got.Status != stripe.PaymentIntentStatusRequiresCapture {
		t.Errorf("Retrieve %s after a restart = %v, %v", pi.ID, got, err)
	}
	stop()

	file := filepath.Join(dir, "paysim.json")
	if err := os.WriteFile(file, []byte("not a snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-port", "0", "-data-dir", dir).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), file) {
		t.Errorf("start on a corrupt file: %v, output %q; want exit status 1 naming %s", err, out, file)
	}
}

// runCommand starts bin with args, waits for its ready line and returns the base URL it
// announced and a stop that sends SIGTERM and waits for a clean exit.
func runCommand(t *testing.T, bin string, args ...string) (url string, stop func()) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	ready, exited := make(chan string, 1), make(chan struct{})
	go func() {
		defer close(exited) // standard output ends when the process exits
		sc := bufio.NewScanner(stdout)
		sc.Scan()
		ready <- sc.Text()
		io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line after 30s")
	}
	m := regexp.MustCompile(`^paysim: ready on (http://127\.0\.0\.1:\d+)$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("ready line %q", line)
	}
	return m[1], func() {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Fatal("still running 30s after SIGTERM")
		}
		if err := cmd.Wait(); err != nil { // only once the output is read, as Wait closes the pipe
			t.Errorf("exit after SIGTERM: %v", err)
		}
	}
}

func TestParseBalances(t *testing.T) {
	got, err := parseBalances("ali=50000, sara=2000,")
	if err != nil || len(got) != 2 || got["ali"] != 50000 || got["sara"] != 2000 {
		t.Errorf("parseBalances = %v, %v", got, err)
	}
	if got, err := parseBalances(""); err != nil || len(got) != 0 {
		t.Errorf("parseBalances(\"\") = %v, %v; want no wallets", got, err)
	}
	for _, bad := range []string{"ali", "ali=lots", "=5", "ali=-1"} {
		if _, err := parseBalances(bad); err == nil {
			t.Errorf("parseBalances(%q) accepted", bad)
		}
	}
}
