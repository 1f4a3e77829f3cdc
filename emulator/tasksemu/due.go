package tasksemu

import (
	"container/heap"
	"time"
)

// The queue keeps its pending tasks in a heap ordered by when they are due (schedule_time,
// then name), so a dispatcher wake-up looks only at the tasks it can start instead of scanning
// and sorting every pending task (which cost a whole core for 500 dispatches/s with 10,000
// tasks waiting). Entries are cleaned lazily: a task that was deleted, purged, started or
// rescheduled since its entry was pushed is skipped when the entry reaches the top.

type dueEntry struct {
	t  *task
	at time.Time
}

type dueHeap []dueEntry

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].t.pb.GetName() < h[j].t.pb.GetName()
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = dueEntry{}
	*h = old[:len(old)-1]
	return e
}

// addLocked makes t a pending task of q. s.mu is held.
func (q *queue) addLocked(t *task) {
	q.tasks[t.id()] = t
	q.scheduleLocked(t)
}

// scheduleLocked (re)enters t in the due heap at its current schedule_time. s.mu is held.
func (q *queue) scheduleLocked(t *task) {
	t.dueAt = t.pb.GetScheduleTime().AsTime()
	heap.Push(&q.due, dueEntry{t: t, at: t.dueAt})
}

// nextDueLocked returns the earliest due task that can start (not deleted, not running, not
// rescheduled since), dropping stale entries; nil when there is none. s.mu is held.
func (q *queue) nextDueLocked() *task {
	for q.due.Len() > 0 {
		e := q.due[0]
		if q.tasks[e.t.id()] == e.t && !e.t.running && e.at.Equal(e.t.dueAt) {
			return e.t
		}
		heap.Pop(&q.due)
	}
	return nil
}
