package tasksemu

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
)

// TestThousandsOfTasks checks checklist item 15: every task is delivered at least once, and
// deleting the queue releases its goroutines and its tasks' memory.
func TestThousandsOfTasks(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 500
	}
	q := loc + "/queues/load"
	s, c := startServer(t, Options{Queues: []QueueConfig{{Name: q, MaxBurstSize: n}}})
	var mu sync.Mutex
	seen := map[string]int{}
	// A target that keeps no bodies, so the heap measures the emulator.
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("X-CloudTasks-TaskName")]++
		mu.Unlock()
	}))
	defer tg.Close()
	ctx := context.Background()
	c.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: q}) // warm up the connection
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()

	const bodySize = 16 << 10
	body := []byte(strings.Repeat("x", bodySize))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			task := httpTask(tg.URL)
			task.GetHttpRequest().Body = body
			if _, err := c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: q, Task: task}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	eventually(t, 60*time.Second, "every task to be delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	eventually(t, 10*time.Second, "the queue to drain", func() bool { return s.snapshotStatus()[q].Depth == 0 })

	if err := c.DeleteQueue(ctx, &cloudtaskspb.DeleteQueueRequest{Name: q}); err != nil {
		t.Fatal(err)
	}
	tg.CloseClientConnections()
	waitGoroutines(t, goroutines)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// The bodies alone are n*16 KiB; what may remain are the names kept for NameReuseWindow.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > int64(n)*bodySize/2 {
		t.Errorf("heap grew by %d bytes after deleting the queue (%d tasks)", grew, n)
	}
}
