package histcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instance "cloud.google.com/go/spanner/admin/instance/apiv1"
	"cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	"google.golang.org/grpc/codes"
)

// Admin creates the instance and the databases the workloads run on, with the official admin
// clients (which, like the data client, follow SPANNER_EMULATOR_HOST).
type Admin struct {
	Instance  string // projects/<p>/instances/<i>
	instances *instance.InstanceAdminClient
	databases *database.DatabaseAdminClient
}

// NewAdmin connects the admin clients and creates the instance projects/<project>/instances/<id>
// on the first instance config the endpoint lists, unless it exists.
func NewAdmin(ctx context.Context, project, id string) (*Admin, error) {
	ic, err := instance.NewInstanceAdminClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("instance admin client: %w", err)
	}
	dc, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		ic.Close()
		return nil, fmt.Errorf("database admin client: %w", err)
	}
	a := &Admin{Instance: "projects/" + project + "/instances/" + id, instances: ic, databases: dc}
	cfg, err := ic.ListInstanceConfigs(ctx, &instancepb.ListInstanceConfigsRequest{Parent: "projects/" + project}).Next()
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("list instance configs: %w", err)
	}
	op, err := ic.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
		Parent:     "projects/" + project,
		InstanceId: id,
		Instance:   &instancepb.Instance{Config: cfg.Name, DisplayName: id, NodeCount: 1},
	})
	if err == nil {
		_, err = op.Wait(ctx)
	}
	if err != nil && spanner.ErrCode(err) != codes.AlreadyExists {
		a.Close()
		return nil, fmt.Errorf("create instance: %w", err)
	}
	return a, nil
}

// CreateDatabase creates a database with Schema and returns its name.
func (a *Admin) CreateDatabase(ctx context.Context) (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := "h" + hex.EncodeToString(b)
	op, err := a.databases.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent:          a.Instance,
		CreateStatement: "CREATE DATABASE `" + id + "`",
		ExtraStatements: Schema,
	})
	if err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	db, err := op.Wait(ctx)
	if err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	return db.GetName(), nil
}

// DropDatabase drops a database.
func (a *Admin) DropDatabase(ctx context.Context, name string) error {
	return a.databases.DropDatabase(ctx, &databasepb.DropDatabaseRequest{Database: name})
}

// Close closes the admin clients.
func (a *Admin) Close() {
	a.instances.Close()
	a.databases.Close()
}

// NewClient opens a data client on a database.
func NewClient(ctx context.Context, name string) (*spanner.Client, error) {
	return spanner.NewClientWithConfig(ctx, name, spanner.ClientConfig{DisableNativeMetrics: true})
}
