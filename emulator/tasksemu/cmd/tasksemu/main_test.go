package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spanmart/spanmart/emulator/tasksemu/retry"
)

// TestCommand builds the command, waits for its ready line, uses it with the official client
// and stops it with SIGTERM.
func TestCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "tasksemu")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const queue = "projects/p/locations/l/queues/q"
	cmd := exec.Command(bin, "-port", "0", "-http-port", "0", "-queue", queue)
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
	m := regexp.MustCompile(`^tasksemu: ready on (127\.0\.0\.1:\d+) \(oidc/status on http://127\.0\.0\.1:\d+\)$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("ready line %q", line)
	}

	ctx := context.Background()
	c, err := cloudtasks.NewClient(ctx, option.WithEndpoint(m[1]), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q, err := c.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queue})
	if err != nil || q.State != cloudtaskspb.Queue_RUNNING {
		t.Fatalf("GetQueue = %v, %v", q, err)
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

func TestQueueFlag(t *testing.T) {
	var q queueFlags
	if err := q.Set("projects/p/locations/l/queues/a"); err != nil {
		t.Fatal(err)
	}
	if err := q.Set("projects/p/locations/l/queues/b?max_dispatches_per_second=100&max_burst_size=10&max_concurrent_dispatches=5&max_attempts=-1&max_retry_duration=1h&min_backoff=10ms&max_backoff=2s&max_doublings=3"); err != nil {
		t.Fatal(err)
	}
	want := queueFlags{
		{Name: "projects/p/locations/l/queues/a"},
		{Name: "projects/p/locations/l/queues/b", MaxDispatchesPerSecond: 100, MaxBurstSize: 10, MaxConcurrentDispatches: 5,
			Retry: retry.Policy{MaxAttempts: -1, MaxRetryDuration: time.Hour, MinBackoff: 10 * time.Millisecond, MaxBackoff: 2 * time.Second, MaxDoublings: 3}},
	}
	if diff := cmp.Diff(want, q); diff != "" {
		t.Errorf("queues (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"q?nope=1", "q?max_attempts=x", "q?min_backoff=5"} {
		if err := q.Set(bad); err == nil {
			t.Errorf("Set(%q) succeeded, want an error", bad)
		}
	}
}
