package tasksemu

import (
	"regexp"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	projectRE = regexp.MustCompile(`^[A-Za-z0-9.:-]+$`)
	locRE     = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
	queueIDRE = regexp.MustCompile(`^[A-Za-z0-9-]{1,100}$`)
	taskIDRE  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,500}$`)
)

// parseLocation checks "projects/P/locations/L".
func parseLocation(name string) error {
	p := strings.Split(name, "/")
	if len(p) != 4 || p[0] != "projects" || p[2] != "locations" || !projectRE.MatchString(p[1]) || !locRE.MatchString(p[3]) {
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
	if parseLocation(parent) != nil || !queueIDRE.MatchString(id) {
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
	if _, err := parseQueueName(queue); err != nil || !taskIDRE.MatchString(id) {
		return "", "", status.Errorf(codes.InvalidArgument, "invalid task name %q: want projects/PROJECT_ID/locations/LOCATION_ID/queues/QUEUE_ID/tasks/TASK_ID with TASK_ID matching [A-Za-z0-9_-]{1,500}", name)
	}
	return queue, id, nil
}

// shortID returns the last path segment of a resource name.
func shortID(name string) string {
	return name[strings.LastIndex(name, "/")+1:]
}
