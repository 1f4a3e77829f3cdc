package platform

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	"cloud.google.com/go/spanner"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
)

// DatabaseName is a full Spanner database name, projects/P/instances/I/databases/D.
type DatabaseName struct {
	Project, Instance, Database string
}

func (d DatabaseName) String() string {
	if d == (DatabaseName{}) {
		return ""
	}
	return "projects/" + d.Project + "/instances/" + d.Instance + "/databases/" + d.Database
}

var (
	// Lenient for projects: emulators accept short names such as "dev", and older project ids
	// carry a domain prefix ("example.com:p").
	projectRE  = regexp.MustCompile(`^([a-z0-9.-]+:)?[a-z0-9][-a-z0-9]{0,62}$`)
	instanceRE = regexp.MustCompile(`^[a-z][-a-z0-9]{0,62}[a-z0-9]$`)
	databaseRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,28}[a-z0-9]$`)
)

// ParseDatabaseName parses and validates a full database name.
func ParseDatabaseName(s string) (DatabaseName, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 6 || parts[0] != "projects" || parts[2] != "instances" || parts[4] != "databases" {
		return DatabaseName{}, fmt.Errorf("want projects/PROJECT/instances/INSTANCE/databases/DATABASE")
	}
	d := DatabaseName{Project: parts[1], Instance: parts[3], Database: parts[5]}
	switch {
	case !projectRE.MatchString(d.Project):
		return DatabaseName{}, fmt.Errorf("bad project id %q", d.Project)
	case !instanceRE.MatchString(d.Instance):
		return DatabaseName{}, fmt.Errorf("bad instance id %q", d.Instance)
	case !databaseRE.MatchString(d.Database):
		return DatabaseName{}, fmt.Errorf("bad database id %q", d.Database)
	}
	return d, nil
}

// EmulatorHost returns SPANNER_EMULATOR_HOST, which the Spanner client library reads itself.
func EmulatorHost() string { return os.Getenv("SPANNER_EMULATOR_HOST") }

// NewSpannerClient returns a data client for database (a full name, validated here). The same
// code serves Cloud Spanner and an emulator: with SPANNER_EMULATOR_HOST set the library connects
// in plaintext without credentials, and we also turn off the native Cloud Monitoring export,
// which would otherwise try to reach Google. Sessions need no tuning: since v1.9x the client
// uses one multiplexed session per database and the old pool settings are ignored.
func NewSpannerClient(ctx context.Context, database string) (*spanner.Client, error) {
	if _, err := ParseDatabaseName(database); err != nil {
		return nil, fmt.Errorf("spanner database %q: %w", database, err)
	}
	cfg := spanner.ClientConfig{
		DisableNativeMetrics: EmulatorHost() != "",
		UserAgent:            "spanmart",
	}
	client, err := spanner.NewClientWithConfig(ctx, database, cfg, GoogleClientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("spanner client for %s: %w", database, err)
	}
	return client, nil
}

// GoogleClientOptions are the options of every Google Cloud client the services create (Spanner,
// Cloud Tasks):
//   - gRPC telemetry off. Google's libraries otherwise put an OpenTelemetry stats handler on every
//     RPC, which builds the attributes of a span and of metrics per call; Spanmart configures no
//     OpenTelemetry SDK, so that work was recorded nowhere, and it was 3–4 % of each service's CPU
//     (README, "Performance"). A team that exports traces drops this option when it installs its
//     SDK.
//   - A fixed HTTP/2 flow-control window (FlowWindow a stream, 4 × FlowWindow a connection). With
//     gRPC-Go's default the window follows an estimate of the link's bandwidth-delay product, for
//     which the client pings the server whenever a response arrives and no ping is out: a PING,
//     its ack and a window update per RPC, each a syscall on both ends, as many as the RPC itself.
func GoogleClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithTelemetryDisabled(),
		option.WithGRPCDialOption(grpc.WithInitialWindowSize(FlowWindow)),
		option.WithGRPCDialOption(grpc.WithInitialConnWindowSize(4 * FlowWindow)),
	}
}

// FlowWindow is the flow-control window of each gRPC stream to a Google API: 16 times gRPC's
// initial 64 KiB, a gigabyte a second per stream at a millisecond's round trip, far above what a
// service reads.
const FlowWindow = 1 << 20

// SpannerCheck is a readiness check running the cheapest query there is, a single-use SELECT 1.
// It fails when the database does not exist, the client is closed or Spanner is unreachable.
func SpannerCheck(name string, client *spanner.Client) Check {
	return Check{Name: name, Func: func(ctx context.Context) error {
		it := client.Single().Query(ctx, spanner.Statement{SQL: "SELECT 1"})
		defer it.Stop()
		if _, err := it.Next(); err != nil && err != iterator.Done {
			return err
		}
		return nil
	}}
}
