package spanneremu

import (
	"context"
	"regexp"
	"strings"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	databasepb "cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// databaseAdminService implements google.spanner.admin.database.v1.DatabaseAdmin.
type databaseAdminService struct {
	databasepb.UnimplementedDatabaseAdminServer
	s *Server
}

// createDatabaseRE matches "CREATE DATABASE name", the name optionally quoted with backticks.
var createDatabaseRE = regexp.MustCompile("(?is)^\\s*CREATE\\s+DATABASE\\s+(?:`([^`]*)`|([^\\s`;]+))\\s*;?\\s*$")

// versionRetentionPeriod is what Spanner reports for a database with default settings.
const versionRetentionPeriod = "1h"

// databaseProto describes an existing database, or returns NOT_FOUND.
func (s *Server) databaseProto(name string) (*databasepb.Database, error) {
	instance, err := splitDatabaseName(name)
	if err != nil {
		return nil, err
	}
	for _, info := range s.eng.ListDatabases(instance) {
		if info.Name == name {
			return s.databaseFromInfo(info.Name, info.CreateTime), nil
		}
	}
	return nil, errorf(codes.NotFound, "Database not found: %s", name)
}

func (s *Server) databaseFromInfo(name string, created time.Time) *databasepb.Database {
	return &databasepb.Database{
		Name:                   name,
		State:                  databasepb.Database_READY,
		CreateTime:             timeProto(created),
		VersionRetentionPeriod: versionRetentionPeriod,
		EarliestVersionTime:    timeProto(earliestVersionTime(created)),
		DatabaseDialect:        databasepb.DatabaseDialect_GOOGLE_STANDARD_SQL,
		EnableDropProtection:   s.dropProtected(name),
	}
}

// earliestVersionTime is the oldest time a stale read may ask for: the version retention
// period ago, but not before the database existed.
func earliestVersionTime(created time.Time) time.Time {
	if t := time.Now().Add(-time.Hour); t.After(created) {
		return t
	}
	return created
}

func (s *Server) dropProtected(name string) bool {
	s.dropProtectionMu.Lock()
	defer s.dropProtectionMu.Unlock()
	return s.dropProtection[name]
}

func (s *Server) setDropProtection(name string, on bool) {
	s.dropProtectionMu.Lock()
	defer s.dropProtectionMu.Unlock()
	if on {
		s.dropProtection[name] = true
	} else {
		delete(s.dropProtection, name)
	}
}

// anyDropProtected reports whether a database whose name starts with prefix is protected.
func (s *Server) anyDropProtected(prefix string) bool {
	s.dropProtectionMu.Lock()
	defer s.dropProtectionMu.Unlock()
	for name := range s.dropProtection {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// forgetDatabasesUnder removes the gRPC layer's state of databases whose name starts with
// prefix, once they are dropped.
func (s *Server) forgetDatabasesUnder(prefix string) {
	s.dropProtectionMu.Lock()
	defer s.dropProtectionMu.Unlock()
	for name := range s.dropProtection {
		if strings.HasPrefix(name, prefix) {
			delete(s.dropProtection, name)
		}
	}
}

func (d *databaseAdminService) ListDatabases(_ context.Context, req *databasepb.ListDatabasesRequest) (*databasepb.ListDatabasesResponse, error) {
	instance := req.GetParent()
	if _, err := checkInstanceName(instance); err != nil {
		return nil, err
	}
	if !d.s.instances.exists(instance) {
		return nil, instanceNotFound(instance)
	}
	infos := d.s.eng.ListDatabases(instance)
	start, end, next, err := page(len(infos), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	resp := &databasepb.ListDatabasesResponse{NextPageToken: next}
	for _, info := range infos[start:end] {
		resp.Databases = append(resp.Databases, d.s.databaseFromInfo(info.Name, info.CreateTime))
	}
	return resp, nil
}

// CreateDatabase creates the database and runs its extra statements before returning a done
// operation. Request errors (bad name, missing instance, existing database) fail the RPC, as
// in Spanner; DDL errors fail the operation and leave no database behind.
func (d *databaseAdminService) CreateDatabase(ctx context.Context, req *databasepb.CreateDatabaseRequest) (*longrunningpb.Operation, error) {
	instance := req.GetParent()
	if _, err := checkInstanceName(instance); err != nil {
		return nil, err
	}
	if req.GetDatabaseDialect() == databasepb.DatabaseDialect_POSTGRESQL {
		return nil, errorf(codes.Unimplemented, "The PostgreSQL dialect is not supported by the emulator")
	}
	m := createDatabaseRE.FindStringSubmatch(req.GetCreateStatement())
	if m == nil {
		return nil, errorf(codes.InvalidArgument, "Invalid create statement: %q (expected CREATE DATABASE `name`)", req.GetCreateStatement())
	}
	id := m[1] + m[2]
	if !validDatabaseID(id) {
		return nil, errorf(codes.InvalidArgument, "Invalid database name: %q (must match [a-z][a-z0-9_\\-]*[a-z0-9], 2 to 30 characters)", id)
	}
	name := instance + "/databases/" + id

	d.s.adminMu.Lock()
	defer d.s.adminMu.Unlock()
	if !d.s.instances.exists(instance) {
		return nil, instanceNotFound(instance)
	}
	if _, err := d.s.eng.Database(name); err == nil {
		return nil, errorf(codes.AlreadyExists, "Database already exists: %s", name)
	}
	md := &databasepb.CreateDatabaseMetadata{Database: name}
	if err := d.s.eng.CreateDatabase(ctx, name, req.GetExtraStatements()); err != nil {
		// The engine leaves nothing behind on a DDL error; dropping again guards the promise
		// that a failed creation never leaves a half-made database.
		if status.Code(err) != codes.AlreadyExists {
			d.s.eng.DropDatabase(name)
		}
		return d.s.ops.finish(name, "", md, nil, err)
	}
	db, err := d.s.databaseProto(name)
	if err != nil {
		return nil, err
	}
	return d.s.ops.finish(name, "", md, db, nil)
}

func (d *databaseAdminService) GetDatabase(_ context.Context, req *databasepb.GetDatabaseRequest) (*databasepb.Database, error) {
	return d.s.databaseProto(req.GetName())
}

// UpdateDatabase only changes drop protection: the other updatable fields have no meaning in
// the emulator.
func (d *databaseAdminService) UpdateDatabase(_ context.Context, req *databasepb.UpdateDatabaseRequest) (*longrunningpb.Operation, error) {
	want := req.GetDatabase()
	if want == nil {
		return nil, errorf(codes.InvalidArgument, "Missing database")
	}
	if _, err := d.s.databaseProto(want.Name); err != nil {
		return nil, err
	}
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return nil, errorf(codes.InvalidArgument, "update_mask is required")
	}
	start := timestamppb.Now()
	for _, p := range paths {
		switch p {
		case "enable_drop_protection":
			d.s.setDropProtection(want.Name, want.EnableDropProtection)
		default:
			return nil, errorf(codes.InvalidArgument, "Unsupported field in update_mask: %s", p)
		}
	}
	db, err := d.s.databaseProto(want.Name)
	if err != nil {
		return nil, err
	}
	md := &databasepb.UpdateDatabaseMetadata{
		Request:  req,
		Progress: &databasepb.OperationProgress{ProgressPercent: 100, StartTime: start, EndTime: timestamppb.Now()},
	}
	return d.s.ops.finish(want.Name, "", md, db, nil)
}

// UpdateDatabaseDdl applies the statements before returning a done operation. As with Spanner,
// a DDL error does not fail the RPC but the operation, which the client's op.Wait returns.
func (d *databaseAdminService) UpdateDatabaseDdl(ctx context.Context, req *databasepb.UpdateDatabaseDdlRequest) (*longrunningpb.Operation, error) {
	name := req.GetDatabase()
	if _, err := d.s.databaseProto(name); err != nil {
		return nil, err
	}
	if len(req.GetStatements()) == 0 {
		return nil, errorf(codes.InvalidArgument, "No DDL statements given")
	}
	if id := req.GetOperationId(); id != "" {
		if _, err := d.s.ops.get(name + "/operations/" + id); err == nil {
			return nil, errorf(codes.AlreadyExists, "Operation already exists: %s/operations/%s", name, id)
		}
	}
	start := timestamppb.Now()
	err := d.s.eng.UpdateDDL(ctx, name, req.GetStatements())
	md := &databasepb.UpdateDatabaseDdlMetadata{Database: name, Statements: req.GetStatements()}
	if err == nil {
		// The engine applies the statements as one change; every statement reports the same
		// completion time.
		done := timestamppb.Now()
		for range req.GetStatements() {
			md.CommitTimestamps = append(md.CommitTimestamps, done)
			md.Progress = append(md.Progress, &databasepb.OperationProgress{ProgressPercent: 100, StartTime: start, EndTime: done})
		}
	}
	return d.s.ops.finish(name, req.GetOperationId(), md, nil, err)
}

func (d *databaseAdminService) DropDatabase(_ context.Context, req *databasepb.DropDatabaseRequest) (*emptypb.Empty, error) {
	name := req.GetDatabase()
	if _, err := splitDatabaseName(name); err != nil {
		return nil, err
	}
	d.s.adminMu.Lock()
	defer d.s.adminMu.Unlock()
	if d.s.dropProtected(name) {
		return nil, errorf(codes.FailedPrecondition, "Database %s has drop protection enabled; disable it before dropping the database", name)
	}
	if err := d.s.eng.DropDatabase(name); err != nil {
		return nil, err
	}
	d.s.sessions.dropUnder(name + "/sessions/")
	d.s.setDropProtection(name, false)
	return &emptypb.Empty{}, nil
}

func (d *databaseAdminService) GetDatabaseDdl(_ context.Context, req *databasepb.GetDatabaseDdlRequest) (*databasepb.GetDatabaseDdlResponse, error) {
	if _, err := splitDatabaseName(req.GetDatabase()); err != nil {
		return nil, err
	}
	stmts, err := d.s.eng.DDL(req.GetDatabase())
	if err != nil {
		return nil, err
	}
	return &databasepb.GetDatabaseDdlResponse{Statements: stmts}, nil
}

// ListDatabaseOperations lists the kept operations of the instance's databases; the filter
// is ignored.
func (d *databaseAdminService) ListDatabaseOperations(_ context.Context, req *databasepb.ListDatabaseOperationsRequest) (*databasepb.ListDatabaseOperationsResponse, error) {
	instance := req.GetParent()
	if _, err := checkInstanceName(instance); err != nil {
		return nil, err
	}
	ops := d.s.ops.list(instance + "/databases/")
	start, end, next, err := page(len(ops), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &databasepb.ListDatabaseOperationsResponse{Operations: ops[start:end], NextPageToken: next}, nil
}

// ListBackups answers with no backups: the emulator has no backups, and clients (the Go
// client's test harness among them) list them while cleaning up an instance.
func (d *databaseAdminService) ListBackups(_ context.Context, req *databasepb.ListBackupsRequest) (*databasepb.ListBackupsResponse, error) {
	instance := req.GetParent()
	if _, err := checkInstanceName(instance); err != nil {
		return nil, err
	}
	if !d.s.instances.exists(instance) {
		return nil, instanceNotFound(instance)
	}
	return &databasepb.ListBackupsResponse{}, nil
}
