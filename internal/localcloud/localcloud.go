// Package localcloud names the local stacks' Google Cloud project and the identities in it: the
// deployables' service accounts, the operator's and the warehouse's. The environments the local
// stacks build (internal/localenv), the CLI's local defaults (tools/spanmartctl) and tests that sign
// tokens for these accounts take the names from here. It imports nothing, so that a binary or a
// test that needs an account's name does not link the local stacks.
package localcloud

// Local Google Cloud names and identities, shared by the stacks (each has its own instance).
const (
	Project        = "spanmart-local"
	Location       = "projects/" + Project + "/locations/us-central1"
	ServiceAccount = "relay@" + Project + ".iam.gserviceaccount.com" // Account("relay")
	// Operator is the account allowed on the services' operator endpoints (ADMIN_ALLOWED_EMAILS).
	Operator = "operator@" + Project + ".iam.gserviceaccount.com"
	// Warehouse is the warehouse's account, allowed to ship and fail shipments on fulfillment
	// (WAREHOUSE_ALLOWED_EMAILS): its ID tokens come from the Tasks emulator's metadata endpoint,
	// as the operator's do.
	Warehouse = "warehouse@" + Project + ".iam.gserviceaccount.com"
	// OrdersAccount is orders' own identity: its audit reads the gateway's operator endpoints
	// (the reconciliation), so it is allowed there too.
	OrdersAccount = "orders@" + Project + ".iam.gserviceaccount.com" // Account("orders")
)

// Account is the local service account of the deployable called name: name@spanmart-local....
func Account(name string) string { return name + "@" + Project + ".iam.gserviceaccount.com" }

// CustomerAudience is the aud of the customers' ID tokens on a local stack: the project id, as
// Identity Platform's tokens carry theirs.
const CustomerAudience = Project
