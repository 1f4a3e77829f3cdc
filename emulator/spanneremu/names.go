package spanneremu

import (
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
)

// Resource names, as Spanner validates them.
var (
	projectNameRE  = regexp.MustCompile(`^projects/([^/]+)$`)
	instanceNameRE = regexp.MustCompile(`^projects/([^/]+)/instances/([^/]+)$`)
	instanceIDRE   = regexp.MustCompile(`^[a-z][-a-z0-9]*[a-z0-9]$`)
	databaseNameRE = regexp.MustCompile(`^(projects/[^/]+/instances/[^/]+)/databases/([^/]+)$`)
	databaseIDRE   = regexp.MustCompile(`^[a-z][a-z0-9_\-]*[a-z0-9]$`)
)

// emulatorConfigID is the only instance configuration the emulator offers, as the official
// emulator does.
const emulatorConfigID = "emulator-config"

func instanceConfigName(project string) string {
	return "projects/" + project + "/instanceConfigs/" + emulatorConfigID
}

// parseProject returns the project id of "projects/P".
func parseProject(name string) (string, error) {
	m := projectNameRE.FindStringSubmatch(name)
	if m == nil {
		return "", errorf(codes.InvalidArgument, "Invalid project name: %s", name)
	}
	return m[1], nil
}

// checkInstanceName validates "projects/P/instances/I" and returns P.
func checkInstanceName(name string) (project string, err error) {
	m := instanceNameRE.FindStringSubmatch(name)
	if m == nil || !validInstanceID(m[2]) {
		return "", errorf(codes.InvalidArgument, "Invalid instance name: %s", name)
	}
	return m[1], nil
}

func validInstanceID(id string) bool {
	return len(id) >= 2 && len(id) <= 64 && instanceIDRE.MatchString(id)
}

// splitDatabaseName validates "projects/P/instances/I/databases/D" and returns the instance
// name.
func splitDatabaseName(name string) (instance string, err error) {
	m := databaseNameRE.FindStringSubmatch(name)
	if m == nil {
		return "", errorf(codes.InvalidArgument, "Invalid database name: %s", name)
	}
	if _, err := checkInstanceName(m[1]); err != nil {
		return "", err
	}
	if !validDatabaseID(m[2]) {
		return "", errorf(codes.InvalidArgument, "Invalid database name: %s", name)
	}
	return m[1], nil
}

func validDatabaseID(id string) bool {
	return len(id) >= 2 && len(id) <= 30 && databaseIDRE.MatchString(id)
}

// splitSessionName validates "<database>/sessions/<id>" and returns the database name.
// Every data request names its session, so this is a split rather than a regular expression's
// match, which cost 1 % of the emulator's CPU in the bench (TestSplitSessionName has the expression
// it agrees with).
func splitSessionName(name string) (database string, err error) {
	i := strings.LastIndex(name, "/sessions/")
	if i < 0 {
		return "", errorf(codes.InvalidArgument, "Invalid session name: %s", name)
	}
	database, id := name[:i], name[i+len("/sessions/"):]
	p := strings.Split(database, "/")
	if id == "" || strings.Contains(id, "/") || len(p) != 6 || p[0] != "projects" || p[2] != "instances" || p[4] != "databases" ||
		p[1] == "" || p[3] == "" || p[5] == "" {
		return "", errorf(codes.InvalidArgument, "Invalid session name: %s", name)
	}
	return database, nil
}

// page returns the slice bounds [start, end) of one page of n items and the token of the next
// page ("" on the last page). Tokens are offsets: listings here are sorted by name and small,
// and an offset that moved because of a concurrent change only skips or repeats an item,
// which Spanner's listings allow as well.
func page(n int, pageSize int32, token string) (start, end int, next string, err error) {
	if token != "" {
		start, err = strconv.Atoi(token)
		if err != nil || start < 0 {
			return 0, 0, "", errorf(codes.InvalidArgument, "Invalid page token: %q", token)
		}
	}
	start = min(start, n)
	end = n
	if pageSize > 0 && start+int(pageSize) < n {
		end = start + int(pageSize)
		next = strconv.Itoa(end)
	}
	return start, end, next, nil
}
