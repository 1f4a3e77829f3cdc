package tasksemu

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spanmart/spanmart/internal/childproc"
)

// crashHelperEnv makes the test binary, run again by TestKillNineMidLoad, serve an emulator
// on the data dir it names until it is killed.
const crashHelperEnv = "TASKSEMU_CRASH_HELPER_DIR"

const crashReadyPrefix = "crash helper ready on "

// crashAckedTasks is how many CreateTasks the child acknowledges before it is killed.
const crashAckedTasks = 2000

// TestKillNineMidLoad is the honest crash test: an emulator in a child process takes
// concurrent CreateTasks and DeleteTasks while it dispatches and retries another queue's tasks
// and compacts its log (a low threshold makes it compact often), and is killed with SIGKILL in
// the middle of it. Restarted on its data dir, the emulator has every task whose CreateTask
// returned and none whose DeleteTask returned, invents none, and delivers every acknowledged
// task of the running queue at least once.
func TestKillNineMidLoad(t *testing.T) {
	if dir := os.Getenv(crashHelperEnv); dir != "" {
		runCrashHelper(dir)
	}
	if testing.Short() {
		t.Skip("runs the emulator in a child process")
	}
	ctx := context.Background()
	dir := t.TempDir()

	// The target of the running queue: the first attempt of each task fails, the second succeeds.
	var deliveredMu sync.Mutex
	delivered := map[string]bool{}
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-CloudTasks-TaskRetryCount") == "0" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		deliveredMu.Lock()
		delivered[r.Header.Get("X-CloudTasks-TaskName")] = true
		deliveredMu.Unlock()
	}))
	defer tg.Close()

	child := exec.Command(os.Args[0], "-test.run=^TestKillNineMidLoad$")
	child.Env = append(os.Environ(), crashHelperEnv+"="+dir)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := childproc.Start(child, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	defer func() {
		child.Process.Kill()
		child.Wait()
	}()
	addr, err := readCrashHelperAddr(out)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cloudtasks.NewClient(ctx, option.WithEndpoint(addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	paused := createQueue(t, c, nil).Name
	if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: paused}); err != nil {
		t.Fatal(err)
	}
	running := createQueue(t, c, &cloudtaskspb.Queue{RetryConfig: fastRetry(-1)}).Name

	var (
		mu                        sync.Mutex
		tried, acked, deleted     = map[string]bool{}, map[string]bool{}, map[string]bool{}
		ackedCount                atomic.Int64
		killed                    atomic.Bool
		wg                        sync.WaitGroup
		unexpected                = make(chan error, 8)
		triedDelete, ackedRunning = map[string]bool{}, map[string]bool{}
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []string // this worker's acknowledged tasks of the paused queue
			for i := 0; ; i++ {
				q := paused
				if i%2 == 1 {
					q = running
				}
				name := fmt.Sprintf("%s/tasks/w%d-%d", q, w, i)
				mu.Lock()
				tried[name] = true
				mu.Unlock()
				task := httpTask(tg.URL + "/" + shortID(name))
				task.Name = name
				_, err := c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: task})
				if err == nil {
					mu.Lock()
					acked[name] = true
					if q == running {
						ackedRunning[name] = true
					}
					mu.Unlock()
					ackedCount.Add(1)
					if q == paused {
						mine = append(mine, name)
					}
				}
				if err == nil && q == paused && len(mine) > 2 && i%3 == 0 {
					victim := mine[0]
					mine = mine[1:]
					mu.Lock()
					triedDelete[victim] = true
					mu.Unlock()
					if err = c.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: victim}); err == nil {
						mu.Lock()
						deleted[victim] = true
						mu.Unlock()
					}
				}
				if err != nil {
					if !killed.Load() {
						unexpected <- fmt.Errorf("before the kill: %w", err)
					}
					return
				}
			}
		}()
	}
	eventually(t, 60*time.Second, fmt.Sprintf("%d acknowledged CreateTasks", crashAckedTasks), func() bool {
		return ackedCount.Load() >= crashAckedTasks || len(unexpected) > 0
	})
	killed.Store(true)
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	child.Wait()
	close(unexpected)
	for err := range unexpected {
		t.Fatal(err)
	}

	snap, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := parseFileHeader(snapshotFile, snap, snapshotMagic)
	if err != nil {
		t.Fatal(err)
	}
	s, c2 := startServer(t, Options{DataDir: dir})
	state := dumpState(s)
	t.Logf("killed after %d acknowledged CreateTasks (%d tried), %d acknowledged DeleteTasks; snapshot generation %d; %d tasks recovered",
		len(acked), len(tried), len(deleted), gen, len(state.Tasks))
	if gen < 2 {
		t.Errorf("snapshot generation %d: the child never compacted, so the test did not cover a crash around compactions", gen)
	}
	for name := range acked {
		_, pending := state.Tasks[name]
		switch {
		case deleted[name] && pending:
			t.Errorf("%s: deleted (acknowledged) but pending after the crash", name)
		case strings.HasPrefix(name, paused+"/") && !deleted[name] && !pending && !triedDelete[name]:
			t.Errorf("%s: created (acknowledged) but lost in the crash", name)
		}
	}
	for name := range state.Tasks {
		if !tried[name] {
			t.Errorf("%s: pending after the crash but never created", name)
		}
	}
	// The running queue's acknowledged tasks were each delivered, before the crash or after.
	eventually(t, 60*time.Second, "every acknowledged task of the running queue to be delivered", func() bool {
		deliveredMu.Lock()
		defer deliveredMu.Unlock()
		for name := range ackedRunning {
			if !delivered[shortID(name)] {
				return false
			}
		}
		return true
	})
	if _, err := c2.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: running}); err != nil {
		t.Fatal(err)
	}
}

// runCrashHelper serves an emulator on dir, with a compaction threshold low enough for the load
// to compact many times, and prints its address; it never returns (the test kills it).
func runCrashHelper(dir string) {
	s, err := Start(context.Background(), Options{DataDir: dir, tuning: storeTuning{compactMinBytes: 32 << 10},
		Logf: func(format string, args ...any) {
			if !strings.Contains(format, " -> ") { // not the per-dispatch lines
				fmt.Fprintf(os.Stderr, "crash helper: "+format+"\n", args...)
			}
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(crashReadyPrefix + s.Addr())
	select {}
}

func readCrashHelperAddr(out interface{ Read([]byte) (int, error) }) (string, error) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), crashReadyPrefix); ok {
			go func() { // keep the pipe drained
				for sc.Scan() {
				}
			}()
			return addr, nil
		}
	}
	return "", fmt.Errorf("the crash helper exited without its ready line: %v", sc.Err())
}
