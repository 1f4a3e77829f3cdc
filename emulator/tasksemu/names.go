package tasksemu

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The characters of a resource name's parts, and their lengths (a queue id 1 to 100, a task id 1
// to 500). Every CreateTask checks its queue's name, so these are loops, not regular
// expressions (which were 1 % of the emulators' CPU under load).
var (
	projectChars = nameChars("0123456789.:-")
	locChars     = nameChars("0123456789-")
	queueChars   = locChars
	taskChars    = nameChars("0123456789_-")
)

// charSet is a set of ASCII bytes.
type charSet [256]bool

// nameChars is the letters A-Z and a-z and extra.
func nameChars(extra string) *charSet {
	var cs charSet
	for c := 'A'; c <= 'Z'; c++ {
		cs[c], cs[c+'a'-'A'] = true, true
	}
	for i := range len(extra) {
		cs[extra[i]] = true
	}
	return &cs
}

// matches reports whether s is 1 to max bytes (any length when max is 0), each in cs.
func (cs *charSet) matches(s string, max int) bool {
	if s == "" || (max > 0 && len(s) > max) {
		return false
	}
	for i := range len(s) {
		if !cs[s[i]] {
			return false
		}
	}
	return true
}

// parseLocation checks "projects/P/locations/L".
func parseLocation(name string) error {
	p := strings.Split(name, "/")
	if len(p) != 4 || p[0] != "projects" || p[2] != "locations" || !projectChars.matches(p[1], 0) || !locChars.matches(p[3], 0) {
		return status.Errorf(codes.InvalidArgument, "invalid location name %q: want projects/PROJECT_ID/locations/LOCATION_ID", name)
	}
	return nil
}

// parseQueueName checks "projects/P/locations/L/queues/Q" and returns the location part.
func parseQueueName(name string) (parent string, err error) {
	i := strings.LastIndex(name, "/queues/")
	if i < 0 {
		return "", status.Errorf(codes.InvalidArgument, "invalid queue name %q: want projects/PROJECT_ID/locations/LOCATION_ID/queues/QUEUE_ID", name)
	}
	parent, id := name[:i], name[i+len("/queues/"):]
	if parseLocation(parent) != nil || !queueChars.matches(id, 100) {
		return "", status.Errorf(codes.InvalidArgument, "invalid queue name %q: want projects/PROJECT_ID/locations/LOCATION_ID/queues/QUEUE_ID with QUEUE_ID matching [A-Za-z0-9-]{1,100}", name)
	}
	return parent, nil
}

// parseTaskName checks "<queue>/tasks/T" and returns the queue name and the task id.
func parseTaskName(name string) (queue, id string, err error) {
	i := strings.LastIndex(name, "/tasks/")
	if i < 0 {
		return "", "", status.Errorf(codes.InvalidArgument, "invalid task name %q: want projects/PROJECT_ID/locations/LOCATION_ID/queues/QUEUE_ID/tasks/TASK_ID", name)
	}
	queue, id = name[:i], name[i+len("/tasks/"):]
	if _, err := parseQueueName(queue); err != nil || !taskChars.matches(id, 500) {
		return "", "", status.Errorf(codes.InvalidArgument, "invalid task name %q: want projects/PROJECT_ID/locations/LOCATION_ID/queues/QUEUE_ID/tasks/TASK_ID with TASK_ID matching [A-Za-z0-9_-]{1,500}", name)
	}
	return queue, id, nil
}

// shortID returns the last path segment of a resource name.
func shortID(name string) string {
	return name[strings.LastIndex(name, "/")+1:]
}
