package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spanmart/spanmart/internal/localenv"
	"github.com/spanmart/spanmart/pkg/dbschema"
)

// TestStack runs the real dev stack as a process (as `make dev` does) on free ports with a temporary
// state directory, three times on the same state:
//
//  1. -smoke on an empty state: builds everything, creates and seeds, exits 0 once healthy.
//  2. a normal run: every service answers, every database has its tables, the queues exist, the
//     seed rows are there (kept from run 1). The test then changes the data and stops the stack
//     with SIGTERM: exit status 0, no child left.
//  3. a restart: the changed data is kept, nothing is re-seeded. The devstack is then killed with
//     SIGKILL and its children must still go away (Pdeathsig, Linux only).
func TestStack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every binary: skipped with -short")
	}
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("the dev stack runs on Linux and macOS only")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	trackSources(t, goBin)
	bin := filepath.Join(t.TempDir(), "devstack")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build devstack: %v\n%s", err, out)
	}
	state := filepath.Join(t.TempDir(), "state")
	offset := freePortOffset(t)
	args := []string{"-state-dir", state, "-port-offset", strconv.Itoa(offset), "-stop-timeout", "5s"}

	t.Run("smoke", func(t *testing.T) {
		r := startStack(t, bin, append(args, "-smoke")...)
		if code := r.wait(t, 8*time.Minute); code != 0 {
			t.Fatalf("devstack -smoke exited with %d, want 0", code)
		}
		if !r.saw("smoke check passed") {
			t.Error(`output lacks "smoke check passed"`)
		}
		assertNoChildren(t, state)
	})
	if t.Failed() {
		return
	}

	t.Run("run", func(t *testing.T) {
		r := startStack(t, bin, args...)
		r.waitReady(t, 2*time.Minute)
		e := connect(t, offset)
		checkServices(t, offset)
		checkTables(t, e)
		checkQueues(t, e)
		checkSeed(t, e)
		checkPayments(t, e, offset)
		checkOperatorTools(t, offset)

		// Changes the restart must keep: less stock of A1 and one product fewer. A re-seed would
		// bring both back.
		mustApply(t, e.spanner[dbschema.Fulfillment], spanner.Update("Inventory", []string{"Sku", "OnHand"}, []any{"A1", int64(4)}))
		mustApply(t, e.spanner[dbschema.Orders], spanner.Delete("Products", spanner.Key{"Z9"}))
		e.close()

		r.signal(t, syscall.SIGTERM)
		if code := r.wait(t, time.Minute); code != 0 {
			t.Errorf("devstack exited with %d after SIGTERM, want 0", code)
		}
		assertNoChildren(t, state)
	})
	if t.Failed() {
		return
	}

	t.Run("restart keeps data", func(t *testing.T) {
		r := startStack(t, bin, args...)
		r.waitReady(t, 2*time.Minute)
		e := connect(t, offset)
		if got := onHand(t, e, "A1"); got != 4 {
			t.Errorf("Inventory A1 OnHand = %d after restart, want 4 (the value before it)", got)
		}
		if n := countOf(t, e.spanner[dbschema.Orders], "SELECT COUNT(*) FROM Products WHERE Sku = 'Z9'"); n != 0 {
			t.Error("deleted product Z9 is back after a restart: the catalog was re-seeded")
		}
		if !r.saw("seed: Products already has") || !r.saw("seed: Inventory already has") {
			t.Error(`output lacks "seed: ... already has": the restart did not report keeping the data`)
		}
		// The payment sandbox kept its payments too (-data-dir), so the gateway's database and the
		// provider still agree: the konbini slip paid in the run before is there.
		resp, err := http.Get(fmt.Sprintf("http://%s:%d/_sandbox/komoju/payments", host, paysimPort+offset))
		if err != nil {
			t.Fatal(err)
		}
		var kept struct {
			Data []struct {
				Status string `json:"status"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&kept)
		resp.Body.Close()
		if err != nil || len(kept.Data) != 1 || kept.Data[0].Status != "captured" {
			t.Errorf("the sandbox after a restart holds %+v (%v), want the one paid konbini slip", kept.Data, err)
		}
		checkServices(t, offset)
		e.close()

		if runtime.GOOS == "linux" {
			// A devstack killed without a chance to clean up must not leave its children running.
			r.signal(t, syscall.SIGKILL)
			r.wait(t, time.Minute)
		} else {
			r.signal(t, syscall.SIGTERM)
			if code := r.wait(t, time.Minute); code != 0 {
				t.Errorf("devstack exited with %d after SIGTERM, want 0", code)
			}
		}
		assertNoChildren(t, state)
	})
	if t.Failed() {
		return
	}

	t.Run("clean", func(t *testing.T) {
		if out, err := exec.Command(bin, "-state-dir", state, "-clean").CombinedOutput(); err != nil {
			t.Fatalf("devstack -clean: %v\n%s", err, out)
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("state directory still exists after -clean (stat: %v)", err)
		}
	})
}

// trackSources opens every source file of the binaries the stack builds. The go command caches a
// passing test's result keyed on the test binary and the files the test itself opens; the services
// are not linked into this test, so without this a broken service would leave a stale "ok" cached.
func trackSources(t *testing.T, goBin string) {
	t.Helper()
	pkgs := []string{"./emulator/devstack", "./emulator/spanneremu/cmd/spanneremu", "./emulator/tasksemu/cmd/tasksemu"}
	for _, s := range services {
		pkgs = append(pkgs, s.pkg)
	}
	cmd := exec.Command(goBin, append([]string{"list", "-deps", "-f",
		"{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}"}, pkgs...)...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, _ := filepath.Abs(cmd.Dir)
	files := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], root+string(filepath.Separator)) {
			continue // modules outside the repository are pinned by go.sum
		}
		for _, f := range fields[1:] {
			files = append(files, filepath.Join(fields[0], f))
		}
	}
	for _, f := range files {
		if data, err := os.Open(f); err == nil {
			io.Copy(io.Discard, data)
			data.Close()
		}
	}
}

// basePorts are every port the stack listens on before -port-offset.
func basePorts() []int {
	ports := []int{spannerPort, tasksPort, tasksHTTPPort, paysimPort, authPort, smtpPort, mailWebPort}
	for _, s := range services {
		ports = append(ports, s.port)
	}
	return ports
}

// freePortOffset picks an offset that puts every port of the stack on a free port between 10000 and
// 30000, below the ephemeral range, so it can clash neither with a dev stack on the default ports
// nor with the free ports other tests are given.
func freePortOffset(t *testing.T) int {
	t.Helper()
	for range 100 {
		offset := 2000 + rand.IntN(18000)
		free := true
		for _, p := range basePorts() {
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p+offset)))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			return offset
		}
	}
	t.Fatal("found no port offset with every port free")
	return 0
}

// running is a devstack process and what it printed.
type running struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	ready chan struct{}
	done  chan struct{}
	code  int
}

func startStack(t *testing.T, bin string, args ...string) *running {
	t.Helper()
	r := &running{ready: make(chan struct{}), done: make(chan struct{})}
	r.cmd = exec.Command(bin, args...)
	pr, pw := io.Pipe()
	r.cmd.Stdout, r.cmd.Stderr = pw, pw
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, sc.Text())
			r.mu.Unlock()
			if sc.Text() == "ready" {
				once.Do(func() { close(r.ready) })
			}
		}
	}()
	go func() {
		r.cmd.Wait()
		pw.Close()
		r.code = r.cmd.ProcessState.ExitCode()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.cmd.Process.Signal(syscall.SIGTERM)
			<-r.done
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if t.Failed() {
			t.Logf("devstack output:\n%s", strings.Join(r.lines, "\n"))
			return
		}
		// Where the time went, for -v.
		for _, l := range r.lines {
			if strings.Contains(l, "built in") || strings.Contains(l, "everything is up") {
				t.Log(l)
			}
		}
	})
	return r
}

func (r *running) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-r.ready:
	case <-r.done:
		t.Fatalf("devstack exited with %d before it was ready", r.code)
	case <-time.After(timeout):
		t.Fatalf("devstack not ready within %s", timeout)
	}
}

func (r *running) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(timeout):
		t.Fatalf("devstack still running after %s", timeout)
		return -1
	}
}

func (r *running) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

func (r *running) saw(substr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.lines, func(l string) bool { return strings.Contains(l, substr) })
}

// assertNoChildren polls until no process runs a binary from the state directory's bin/ (every
// child of the devstack does), failing with the survivors after a deadline.
func assertNoChildren(t *testing.T, state string) {
	t.Helper()
	if _, err := os.Stat("/proc/self/exe"); err != nil {
		t.Log("no /proc: not checking for leftover processes")
		return
	}
	prefix := filepath.Join(state, "bin") + string(filepath.Separator)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left []string
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			if exe, err := os.Readlink(filepath.Join(d, "exe")); err == nil && strings.HasPrefix(exe, prefix) {
				left = append(left, fmt.Sprintf("pid %s: %s", filepath.Base(d), exe))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("children of the devstack still run after it exited:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(50 * time.Millisecond) // polling for a condition, bounded by the deadline
	}
}

// endpoints are clients of the stack's emulators.
type endpoints struct {
	spanner map[string]*spanner.Client // by database
	tasks   *cloudtasks.Client
}

func connect(t *testing.T, offset int) *endpoints {
	t.Helper()
	ctx := context.Background()
	t.Setenv("SPANNER_EMULATOR_HOST", fmt.Sprintf("%s:%d", host, spannerPort+offset))
	e := &endpoints{spanner: map[string]*spanner.Client{}}
	for _, db := range dbschema.Databases() {
		c, err := spanner.NewClientWithConfig(ctx, databaseName(db.Name), spanner.ClientConfig{
			DisableNativeMetrics: true,
			SessionPoolConfig:    spanner.SessionPoolConfig{MinOpened: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		e.spanner[db.Name] = c
	}
	var err error
	e.tasks, err = cloudtasks.NewClient(ctx,
		option.WithEndpoint(fmt.Sprintf("%s:%d", host, tasksPort+offset)),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}

func (e *endpoints) close() {
	for name, c := range e.spanner {
		c.Close()
		delete(e.spanner, name)
	}
	if e.tasks != nil {
		e.tasks.Close()
		e.tasks = nil
	}
}

func checkServices(t *testing.T, offset int) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	urls := []string{fmt.Sprintf("http://%s:%d/", host, tasksHTTPPort+offset)}
	for _, s := range services {
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			urls = append(urls, fmt.Sprintf("http://%s:%d%s", host, s.port+offset, path))
		}
	}
	for _, u := range urls {
		resp, err := client.Get(u)
		if err != nil {
			t.Errorf("GET %s: %v", u, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s, want 200", u, resp.Status)
		}
	}
}

// checkPayments places orders on the running stack as a customer would, paid through the sandbox
// process: a card that authorizes is confirmed, shipped by the simulated carrier, captured and
// COMPLETED; a declined one CANCELLED with its stock back; a konbini order waits with its slip
// until the sandbox is told the customer paid, then completes too. The customer's e-mails arrive
// in Mailpit's inbox, once each.
func checkPayments(t *testing.T, e *endpoints, offset int) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	ordersURL := fmt.Sprintf("http://%s:%d", host, serviceNamed("orders").port+offset)
	token := customerToken(t, offset, "devstack-test")
	place := func(payment string) string {
		t.Helper()
		body := `{"customer_id":"devstack-test","email":"devstack@example.com","lines":[{"sku":"A2","quantity":1}],"payment":` + payment + `}`
		req, _ := http.NewRequest(http.MethodPost, ordersURL+"/v1/orders", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("devstack-test-%d", rand.Int64()))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var o struct{ ID string }
		if err := json.NewDecoder(resp.Body).Decode(&o); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /v1/orders %s: %s, %v", payment, resp.Status, err)
		}
		return o.ID
	}
	until := func(what string, ok func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			done, got := ok()
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %s after 30 s", what, got)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	status := func(id, want string) {
		t.Helper()
		until("order "+id+" becomes "+want, func() (bool, string) {
			var st, reason string
			row, err := e.spanner[dbschema.Orders].Single().ReadRow(context.Background(), "Orders", spanner.Key{id}, []string{"Status", "CancelReason"})
			if err != nil {
				return false, err.Error()
			}
			var r spanner.NullString
			if err := row.Columns(&st, &r); err != nil {
				return false, err.Error()
			}
			reason = strings.TrimSpace(st + " " + r.StringVal)
			return reason == want, reason
		})
	}
	before := reservedOf(t, e, "A2")
	visa := place(`{"method":"card","payment_method":"pm_card_visa"}`)
	declined := place(`{"method":"card","payment_method":"pm_card_chargeDeclined"}`)
	konbini := place(`{"method":"konbini","store":"lawson"}`)
	status(visa, "COMPLETED")
	status(declined, "CANCELLED payment_declined")

	var kid string
	until("the konbini slip is issued", func() (bool, string) {
		err := e.spanner[dbschema.Payments].Single().Query(context.Background(), spanner.Statement{
			SQL: "SELECT IFNULL(ProviderPaymentId, '') FROM Payments WHERE OrderId = @id AND Status = 'PENDING'", Params: map[string]any{"id": konbini},
		}).Do(func(r *spanner.Row) error { return r.Column(0, &kid) })
		return err == nil && kid != "", fmt.Sprint("no pending payment ", err)
	})
	status(konbini, "AWAITING_PAYMENT")
	resp, err := client.Post(fmt.Sprintf("http://%s:%d/_sandbox/komoju/payments/%s/pay", host, paysimPort+offset, kid), "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the sandbox refused to pay slip %s: %s", kid, resp.Status)
	}
	status(konbini, "COMPLETED")
	if got := reservedOf(t, e, "A2"); got != before {
		t.Errorf("A2 reserved %d → %d, want unchanged (two orders shipped, the declined one gave its unit back)", before, got)
	}
	want := map[string][]string{
		visa:     {"order_confirmed", "order_shipped"},
		declined: {"order_cancelled"},
		konbini:  {"order_confirmed", "order_shipped", "payment_instructions"},
	}
	for id, templates := range want {
		until("the e-mails about order "+id, func() (bool, string) {
			got := mailpitTemplates(t, offset, id)
			return slices.Equal(got, templates), fmt.Sprint(got)
		})
	}
}

// mailpitTemplates lists the templates of the e-mails in Mailpit's inbox about an order (its id
// is in the subject), sorted, through Mailpit's API.
func mailpitTemplates(t *testing.T, offset int, orderID string) []string {
	t.Helper()
	base := fmt.Sprintf("http://%s:%d/api/v1", host, mailWebPort+offset)
	var found struct {
		Messages []struct{ ID string } `json:"messages"`
	}
	getJSON(t, base+"/search?query="+url.QueryEscape(`subject:"`+orderID+`"`), &found)
	var out []string
	for _, m := range found.Messages {
		var headers map[string][]string
		getJSON(t, base+"/message/"+m.ID+"/headers", &headers)
		out = append(out, strings.Join(headers["X-Spanmart-Template"], ","))
	}
	sort.Strings(out)
	return out
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// checkOperatorTools runs spanmartctl against the running stack as an operator would (-env dev:
// the dev stack's ports and its Tasks emulator minting the operator's tokens): the healthy stack's
// status is clean (exit 0) and its dead letters are listed (none); an operator endpoint without a
// token is refused.
// tokenCommand is the README's one command that gets a customer's ID token from the dev stack's
// identity provider.
var tokenCommand = regexp.MustCompile(`curl -s -X POST 127\.0\.0\.1:(\d+)/token -d '(\{"sub":"[^"]+"\})'`)

// customerToken gets customer's ID token with the command the dev stack's README documents (run
// as it is written, with the stack's port offset and the customer's id), and checks that orders
// takes it and refuses a request without one.
func customerToken(t *testing.T, offset int, customer string) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := tokenCommand.FindStringSubmatch(string(readme))
	if m == nil {
		t.Fatalf("README.md documents no command matching %s", tokenCommand)
	}
	if m[1] != strconv.Itoa(authPort) {
		t.Fatalf("README.md's token command names port %s, the identity provider listens on %d", m[1], authPort)
	}
	var doc struct {
		Sub string `json:"sub"`
	}
	if err := json.Unmarshal([]byte(m[2]), &doc); err != nil {
		t.Fatalf("README.md's token command sends %s: %v", m[2], err)
	}
	body := strings.Replace(m[2], `"`+doc.Sub+`"`, strconv.Quote(customer), 1)
	addr := fmt.Sprintf("%s:%d/token", host, authPort+offset)
	var token string
	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command(curl, "-s", "-X", "POST", addr, "-d", body).Output()
		if err != nil {
			t.Fatalf("curl -s -X POST %s -d %s: %v", addr, body, err)
		}
		token = string(out)
	} else {
		// What curl -d sends, without curl.
		resp, err := http.Post("http://"+addr, "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		token = string(b)
	}
	if strings.Count(token, ".") != 2 {
		t.Fatalf("the README's token command printed %q, want a JWT", token)
	}
	ordersURL := fmt.Sprintf("http://%s:%d", host, serviceNamed("orders").port+offset)
	for auth, want := range map[string]int{"": http.StatusUnauthorized, "Bearer " + token: http.StatusNotFound} {
		req, _ := http.NewRequest(http.MethodGet, ordersURL+"/v1/orders/00000000-0000-4000-8000-000000000000", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET an unknown order with Authorization %.20q = %s, want %d", auth, resp.Status, want)
		}
	}
	return token
}

func checkOperatorTools(t *testing.T, offset int) {
	t.Helper()
	dir := t.TempDir()
	root, err := localenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := localenv.Build(context.Background(), root, dir, []string{"./tools/spanmartctl"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"status"}, {"deadletters", "list"}} {
		cmd := exec.Command(filepath.Join(dir, "spanmartctl"), append([]string{"-env", "dev", "-port-offset", strconv.Itoa(offset)}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("spanmartctl %v on the dev stack: %v\n%s", args, err, out)
		}
	}
	resp, err := http.Get(fmt.Sprintf("http://%s:%d/admin/deadletters", host, serviceNamed("fulfillment").port+offset))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /admin/deadletters without a token = %s, want 401", resp.Status)
	}
}

func reservedOf(t *testing.T, e *endpoints, sku string) int64 {
	t.Helper()
	row, err := e.spanner[dbschema.Fulfillment].Single().ReadRow(context.Background(), "Inventory", spanner.Key{sku}, []string{"Reserved"})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := row.Column(0, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

var createTable = regexp.MustCompile(`(?i)^\s*CREATE\s+TABLE\s+(\w+)`)

// checkTables compares each database's tables with the CREATE TABLE statements of its migrations
// (plus the runner's SchemaMigrations), so the check follows the schema as it grows.
func checkTables(t *testing.T, e *endpoints) {
	t.Helper()
	for _, db := range dbschema.Databases() {
		migs, err := db.Migrations()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"SchemaMigrations"}
		for _, m := range migs {
			for _, s := range m.Statements {
				if sub := createTable.FindStringSubmatch(s); sub != nil {
					want = append(want, sub[1])
				}
			}
		}
		var got []string
		it := e.spanner[db.Name].Single().Query(context.Background(), spanner.Statement{
			SQL: "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = ''"})
		err = it.Do(func(r *spanner.Row) error {
			var name string
			if err := r.Column(0, &name); err != nil {
				return err
			}
			got = append(got, name)
			return nil
		})
		if err != nil {
			t.Fatalf("list tables of %s: %v", db.Name, err)
		}
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tables of database %s (-want +got):\n%s", db.Name, diff)
		}
	}
}

func checkQueues(t *testing.T, e *endpoints) {
	t.Helper()
	for _, id := range queueIDs {
		q, err := e.tasks.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: queueName(id)})
		if err != nil {
			t.Errorf("queue %s: %v", id, err)
			continue
		}
		if q.GetState() != cloudtaskspb.Queue_RUNNING || q.GetRetryConfig().GetMaxAttempts() != -1 {
			t.Errorf("queue %s: state %s, max_attempts %d; want RUNNING, -1", id, q.GetState(), q.GetRetryConfig().GetMaxAttempts())
		}
	}
}

func checkSeed(t *testing.T, e *endpoints) {
	t.Helper()
	products, err := parseSeed(seedJSON)
	if err != nil {
		t.Fatal(err)
	}
	if n := countOf(t, e.spanner[dbschema.Orders], "SELECT COUNT(*) FROM Products"); n != int64(len(products)) {
		t.Errorf("Products has %d rows, want %d (seed.json)", n, len(products))
	}
	if n := countOf(t, e.spanner[dbschema.Fulfillment], "SELECT COUNT(*) FROM Inventory WHERE Reserved = 0"); n != int64(len(products)) {
		t.Errorf("Inventory has %d unreserved rows, want %d (seed.json)", n, len(products))
	}
	row, err := e.spanner[dbschema.Orders].Single().ReadRow(context.Background(), "Products", spanner.Key{"A1"}, []string{"PriceMinor", "Currency", "Active"})
	if err != nil {
		t.Fatalf("read product A1: %v", err)
	}
	var price int64
	var currency string
	var active bool
	if err := row.Columns(&price, &currency, &active); err != nil {
		t.Fatal(err)
	}
	if price <= 0 || currency == "" || !active {
		t.Errorf("product A1: price %d %s, active %v; want a positive price and active", price, currency, active)
	}
	if got := onHand(t, e, "A1"); got != 5 {
		t.Errorf("Inventory A1 OnHand = %d, want 5", got)
	}
}

func onHand(t *testing.T, e *endpoints, sku string) int64 {
	t.Helper()
	row, err := e.spanner[dbschema.Fulfillment].Single().ReadRow(context.Background(), "Inventory", spanner.Key{sku}, []string{"OnHand"})
	if err != nil {
		t.Fatalf("read Inventory %s: %v", sku, err)
	}
	var n int64
	if err := row.Column(0, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func countOf(t *testing.T, c *spanner.Client, sql string) int64 {
	t.Helper()
	var n int64
	err := c.Single().Query(context.Background(), spanner.Statement{SQL: sql}).Do(func(r *spanner.Row) error { return r.Column(0, &n) })
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func mustApply(t *testing.T, c *spanner.Client, ms ...*spanner.Mutation) {
	t.Helper()
	if _, err := c.Apply(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
}

// TestSeedFile checks the checked-in seed.json and that mistakes in it are reported by name.
func TestSeedFile(t *testing.T) {
	products, err := parseSeed(seedJSON)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(products, func(p seedProduct) bool { return p.SKU == "A1" })
	if i < 0 || products[i].OnHand != 5 || !products[i].Active {
		t.Errorf("seed.json must hold an active product A1 with on_hand 5 (the demo uses it); got %+v", products)
	}
	for _, tc := range []struct{ name, json, want string }{
		{"duplicate", `{"products":[{"sku":"X","name":"x","currency":"JPY"},{"sku":"X","name":"y","currency":"JPY"}]}`, "appears twice"},
		{"currency", `{"products":[{"sku":"X","name":"x","currency":"yen"}]}`, "ISO 4217"},
		{"negative stock", `{"products":[{"sku":"X","name":"x","currency":"JPY","on_hand":-1}]}`, "on_hand is negative"},
		{"unknown field", `{"products":[{"sku":"X","name":"x","currency":"JPY","price":1}]}`, "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseSeed([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parseSeed: %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}
