package daotest

import (
	"slices"
	"testing"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/gen/dao/fulfillmentdb"
	"github.com/spanmart/spanmart/gen/dao/notificationsdb"
	"github.com/spanmart/spanmart/gen/dao/ordersdb"
	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/gen/dao/paymentsdb"
	"github.com/spanmart/spanmart/pkg/dbschema"
)

// databases lists, per database, its generated tables (those of the shared outbox stream, in
// outboxdb, and its own) and a case for each table.
var databases = []struct {
	name   string
	tables []string
	cases  func() []tableCase
}{
	{dbschema.Orders, append(outboxdb.Tables(), ordersdb.Tables()...), func() []tableCase { return append(sharedCases(), ordersCases()...) }},
	{dbschema.Fulfillment, append(outboxdb.Tables(), fulfillmentdb.Tables()...), func() []tableCase { return append(sharedCases(), fulfillmentCases()...) }},
	{dbschema.Payments, append(outboxdb.Tables(), paymentsdb.Tables()...), func() []tableCase { return append(sharedCases(), paymentsCases()...) }},
	{dbschema.Notifications, append(outboxdb.Tables(), notificationsdb.Tables()...), func() []tableCase { return append(sharedCases(), notificationsCases()...) }},
}

// TestEveryTable runs the life of a row (insert, reads by key, key set and every index, update,
// partial update, deletes) through the generated code of every table of every database.
func TestEveryTable(t *testing.T) {
	for _, db := range databases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			client, _ := env.NewDatabase(t, db.name)
			var covered []string
			for _, c := range db.cases() {
				covered = append(covered, c.table)
				t.Run(c.table, func(t *testing.T) { c.run(t, client) })
			}
			for _, table := range db.tables {
				if !slices.Contains(covered, table) {
					t.Errorf("table %s has no test case", table)
				}
			}
		})
	}
}

func order(id, customer string) *ordersdb.Order {
	return &ordersdb.Order{OrderId: id, CustomerId: customer, Status: "PENDING", Currency: "JPY", TotalMinor: 1200,
		Version: 1, CreatedAt: spanner.CommitTimestamp, UpdatedAt: spanner.CommitTimestamp}
}

func ordersCases() []tableCase {
	return []tableCase{
		{ordersdb.ProductsTable, lc[ordersdb.Product, *ordersdb.Product]{
			values: map[string]any{"Sku": "SKU-1", "Name": "Tea", "Description": str("green"), "PriceMinor": int64(600),
				"Currency": "JPY", "Active": true, "CreatedAt": spanner.CommitTimestamp, "UpdatedAt": spanner.CommitTimestamp},
			change:   map[string]any{"Name": "Green tea", "Description": spanner.NullString{}, "Active": false},
			listed:   map[string]any{"PriceMinor": int64(650), "UpdatedAt": spanner.CommitTimestamp},
			unlisted: map[string]any{"Name": "not written"},
			read: func(ctx ctxT, r reader, x *ordersdb.Product) (*ordersdb.Product, error) {
				return ordersdb.ReadProduct(ctx, r, x.Sku)
			},
			readRows: ordersdb.ReadProductRows,
			del:      func(x *ordersdb.Product) *spanner.Mutation { return ordersdb.DeleteProduct(x.Sku) },
		}.run},
		{ordersdb.OrdersTable, lc[ordersdb.Order, *ordersdb.Order]{
			values: map[string]any{"OrderId": "o-1", "CustomerId": "c-1", "Status": "PENDING", "Currency": "JPY", "TotalMinor": int64(1200),
				"Version": int64(1), "CancelReason": spanner.NullString{}, "CreatedAt": spanner.CommitTimestamp, "UpdatedAt": spanner.CommitTimestamp},
			change:   map[string]any{"Status": "CANCELLING", "Version": int64(2), "CancelReason": str("customer")},
			listed:   map[string]any{"Status": "CANCELLED", "Version": int64(3), "UpdatedAt": spanner.CommitTimestamp},
			unlisted: map[string]any{"TotalMinor": int64(1)},
			read: func(ctx ctxT, r reader, x *ordersdb.Order) (*ordersdb.Order, error) {
				return ordersdb.ReadOrder(ctx, r, x.OrderId)
			},
			readRows: ordersdb.ReadOrderRows,
			del:      func(x *ordersdb.Order) *spanner.Mutation { return ordersdb.DeleteOrder(x.OrderId) },
			indexes: map[string]func(ctxT, reader, *ordersdb.Order) ([]*ordersdb.Order, error){
				"OrdersByCustomer prefix": func(ctx ctxT, r reader, x *ordersdb.Order) ([]*ordersdb.Order, error) {
					return ordersdb.ReadOrdersByCustomerByCustomerId(ctx, r, x.CustomerId)
				},
				"OrdersByCustomer": func(ctx ctxT, r reader, x *ordersdb.Order) ([]*ordersdb.Order, error) {
					return ordersdb.ReadOrdersByCustomer(ctx, r, x.CustomerId, x.CreatedAt)
				},
			},
		}.run},
		{ordersdb.OrderItemsTable, lc[ordersdb.OrderItem, *ordersdb.OrderItem]{
			parents: []*spanner.Mutation{order("o-items", "c-2").Insert()},
			values: map[string]any{"OrderId": "o-items", "LineNo": int64(1), "Sku": "SKU-1", "Quantity": int64(2),
				"UnitPriceMinor": int64(600)},
			change:   map[string]any{"Quantity": int64(3)},
			listed:   map[string]any{"Quantity": int64(4)},
			unlisted: map[string]any{"Sku": "SKU-X"},
			read: func(ctx ctxT, r reader, x *ordersdb.OrderItem) (*ordersdb.OrderItem, error) {
				return ordersdb.ReadOrderItem(ctx, r, x.OrderId, x.LineNo)
			},
			readRows: ordersdb.ReadOrderItemRows,
			del:      func(x *ordersdb.OrderItem) *spanner.Mutation { return ordersdb.DeleteOrderItem(x.OrderId, x.LineNo) },
		}.run},
		{ordersdb.OrderTimelineTable, lc[ordersdb.OrderTimeline, *ordersdb.OrderTimeline]{
			parents: []*spanner.Mutation{order("o-timeline", "c-3").Insert()},
			values: map[string]any{"OrderId": "o-timeline", "Seq": int64(1), "Direction": "emitted", "EventType": "order.created",
				"EventId": "8d7a2a3e-0000-4000-8000-000000000010", "AggregateType": "order", "AggregateVersion": int64(1),
				"RecordedAt": spanner.CommitTimestamp},
			change:   map[string]any{"Direction": "consumed", "EventType": "inventory.reserved"},
			listed:   map[string]any{"AggregateVersion": int64(2)},
			unlisted: map[string]any{"EventType": "order.cancelled"},
			read: func(ctx ctxT, r reader, x *ordersdb.OrderTimeline) (*ordersdb.OrderTimeline, error) {
				return ordersdb.ReadOrderTimeline(ctx, r, x.OrderId, x.Seq)
			},
			readRows: ordersdb.ReadOrderTimelineRows,
			del: func(x *ordersdb.OrderTimeline) *spanner.Mutation {
				return ordersdb.DeleteOrderTimeline(x.OrderId, x.Seq)
			},
		}.run},
		{ordersdb.IdempotencyKeysTable, lc[ordersdb.IdempotencyKey, *ordersdb.IdempotencyKey]{
			values: map[string]any{"KeyHash": "ab12", "Scope": "POST /v1/orders", "ClientKey": "k-1", "RequestHash": "cd34",
				"OrderId": spanner.NullString{}, "ResponseStatus": spanner.NullInt64{}, "ResponseBody": spanner.NullJSON{},
				"CreatedAt": spanner.CommitTimestamp},
			change:   map[string]any{"OrderId": str("o-1")},
			listed:   map[string]any{"ResponseStatus": i64(201), "ResponseBody": js(map[string]any{"orderId": "o-1"})},
			unlisted: map[string]any{"RequestHash": "zz"},
			read: func(ctx ctxT, r reader, x *ordersdb.IdempotencyKey) (*ordersdb.IdempotencyKey, error) {
				return ordersdb.ReadIdempotencyKey(ctx, r, x.KeyHash)
			},
			readRows: ordersdb.ReadIdempotencyKeyRows,
			del:      func(x *ordersdb.IdempotencyKey) *spanner.Mutation { return ordersdb.DeleteIdempotencyKey(x.KeyHash) },
		}.run},
	}
}

func fulfillmentCases() []tableCase {
	return []tableCase{
		{fulfillmentdb.InventoryTable, lc[fulfillmentdb.Inventory, *fulfillmentdb.Inventory]{
			values:   map[string]any{"Sku": "SKU-1", "OnHand": int64(10), "Reserved": int64(2), "UpdatedAt": spanner.CommitTimestamp},
			change:   map[string]any{"Reserved": int64(5)},
			listed:   map[string]any{"OnHand": int64(8), "UpdatedAt": spanner.CommitTimestamp},
			unlisted: map[string]any{"Reserved": int64(0)},
			read: func(ctx ctxT, r reader, x *fulfillmentdb.Inventory) (*fulfillmentdb.Inventory, error) {
				return fulfillmentdb.ReadInventory(ctx, r, x.Sku)
			},
			readRows: fulfillmentdb.ReadInventoryRows,
			del:      func(x *fulfillmentdb.Inventory) *spanner.Mutation { return fulfillmentdb.DeleteInventory(x.Sku) },
		}.run},
		{fulfillmentdb.ReservationsTable, lc[fulfillmentdb.Reservation, *fulfillmentdb.Reservation]{
			values: map[string]any{"OrderId": "o-1", "Sku": "SKU-1", "Quantity": int64(2), "Status": "HELD",
				"CreatedAt": spanner.CommitTimestamp, "UpdatedAt": spanner.CommitTimestamp},
			change:   map[string]any{"Quantity": int64(3)},
			listed:   map[string]any{"Status": "RELEASED", "UpdatedAt": spanner.CommitTimestamp},
			unlisted: map[string]any{"Quantity": int64(99)},
			read: func(ctx ctxT, r reader, x *fulfillmentdb.Reservation) (*fulfillmentdb.Reservation, error) {
				return fulfillmentdb.ReadReservation(ctx, r, x.OrderId, x.Sku)
			},
			readRows: fulfillmentdb.ReadReservationRows,
			del: func(x *fulfillmentdb.Reservation) *spanner.Mutation {
				return fulfillmentdb.DeleteReservation(x.OrderId, x.Sku)
			},
			indexes: map[string]func(ctxT, reader, *fulfillmentdb.Reservation) ([]*fulfillmentdb.Reservation, error){
				"ReservationsBySku prefix": func(ctx ctxT, r reader, x *fulfillmentdb.Reservation) ([]*fulfillmentdb.Reservation, error) {
					return fulfillmentdb.ReadReservationsBySkuBySku(ctx, r, x.Sku)
				},
				"ReservationsBySku": func(ctx ctxT, r reader, x *fulfillmentdb.Reservation) ([]*fulfillmentdb.Reservation, error) {
					return fulfillmentdb.ReadReservationsBySku(ctx, r, x.Sku, x.Status)
				},
			},
		}.run},
		{fulfillmentdb.OrderReservationsTable, lc[fulfillmentdb.OrderReservation, *fulfillmentdb.OrderReservation]{
			values: map[string]any{"OrderId": "o-1", "Status": "HELD", "Version": int64(1),
				"CreatedAt": spanner.CommitTimestamp, "UpdatedAt": spanner.CommitTimestamp},
			change:   map[string]any{"Status": "REJECTED"},
			listed:   map[string]any{"Status": "RELEASED", "UpdatedAt": spanner.CommitTimestamp},
			unlisted: map[string]any{"Version": int64(9)},
			read: func(ctx ctxT, r reader, x *fulfillmentdb.OrderReservation) (*fulfillmentdb.OrderReservation, error) {
				return fulfillmentdb.ReadOrderReservation(ctx, r, x.OrderId)
			},
			readRows: fulfillmentdb.ReadOrderReservationRows,
			del: func(x *fulfillmentdb.OrderReservation) *spanner.Mutation {
				return fulfillmentdb.DeleteOrderReservation(x.OrderId)
			},
		}.run},
		{fulfillmentdb.ShipmentsTable, lc[fulfillmentdb.Shipment, *fulfillmentdb.Shipment]{
			values: map[string]any{"ShipmentId": "s-1", "OrderId": "o-1", "Status": "PENDING", "Carrier": spanner.NullString{},
				"TrackingNumber": spanner.NullString{}, "Version": int64(1), "CreatedAt": spanner.CommitTimestamp,
				"UpdatedAt": spanner.CommitTimestamp, "ShippedAt": spanner.NullTime{}},
			change:   map[string]any{"Carrier": str("yamato"), "Version": int64(2)},
			listed:   map[string]any{"Status": "SHIPPED", "TrackingNumber": str("1234"), "ShippedAt": tm(t1)},
			unlisted: map[string]any{"Carrier": str("sagawa")},
			read: func(ctx ctxT, r reader, x *fulfillmentdb.Shipment) (*fulfillmentdb.Shipment, error) {
				return fulfillmentdb.ReadShipment(ctx, r, x.ShipmentId)
			},
			readRows: fulfillmentdb.ReadShipmentRows,
			del:      func(x *fulfillmentdb.Shipment) *spanner.Mutation { return fulfillmentdb.DeleteShipment(x.ShipmentId) },
			indexes: map[string]func(ctxT, reader, *fulfillmentdb.Shipment) ([]*fulfillmentdb.Shipment, error){
				"ShipmentsByOrder": func(ctx ctxT, r reader, x *fulfillmentdb.Shipment) ([]*fulfillmentdb.Shipment, error) {
					return unique(fulfillmentdb.ReadShipmentsByOrder(ctx, r, x.OrderId))
				},
			},
		}.run},
	}
}

func paymentsCases() []tableCase {
	return []tableCase{
		{paymentsdb.PaymentsTable, lc[paymentsdb.Payment, *paymentsdb.Payment]{
			values: map[string]any{"PaymentId": "p-1", "OrderId": "o-1", "Provider": "sandbox", "Method": "KONBINI",
				"Status": "REQUESTED", "AmountMinor": int64(1200), "Currency": "JPY", "ProviderPaymentId": str("pp-1"),
				"FailureReason": spanner.NullString{}, "ExpiresAt": tm(t1), "Version": int64(1),
				"CreatedAt": spanner.CommitTimestamp, "UpdatedAt": spanner.CommitTimestamp},
			change:   map[string]any{"Status": "PENDING", "Version": int64(2)},
			listed:   map[string]any{"Status": "AUTHORIZED", "ProviderPaymentId": str("pp-2"), "UpdatedAt": spanner.CommitTimestamp},
			unlisted: map[string]any{"AmountMinor": int64(5)},
			read: func(ctx ctxT, r reader, x *paymentsdb.Payment) (*paymentsdb.Payment, error) {
				return paymentsdb.ReadPayment(ctx, r, x.PaymentId)
			},
			readRows: paymentsdb.ReadPaymentRows,
			del:      func(x *paymentsdb.Payment) *spanner.Mutation { return paymentsdb.DeletePayment(x.PaymentId) },
			indexes: map[string]func(ctxT, reader, *paymentsdb.Payment) ([]*paymentsdb.Payment, error){
				"PaymentsByOrder": func(ctx ctxT, r reader, x *paymentsdb.Payment) ([]*paymentsdb.Payment, error) {
					return paymentsdb.ReadPaymentsByOrder(ctx, r, x.OrderId)
				},
				"PaymentsByProviderPayment": func(ctx ctxT, r reader, x *paymentsdb.Payment) ([]*paymentsdb.Payment, error) {
					return unique(paymentsdb.ReadPaymentsByProviderPayment(ctx, r, x.Provider, x.ProviderPaymentId.StringVal))
				},
				"PaymentsByProviderPayment prefix": func(ctx ctxT, r reader, x *paymentsdb.Payment) ([]*paymentsdb.Payment, error) {
					return paymentsdb.ReadPaymentsByProviderPaymentByProvider(ctx, r, x.Provider)
				},
			},
		}.run},
		{paymentsdb.ProviderEventsTable, lc[paymentsdb.ProviderEvent, *paymentsdb.ProviderEvent]{
			values: map[string]any{"EventKey": "ff00", "Provider": "sandbox", "ProviderEventId": "evt-1", "PaymentId": str("p-1"),
				"EventType": "payment.authorized", "Payload": js(map[string]any{"id": "evt-1"}), "ReceivedAt": spanner.CommitTimestamp},
			change:   map[string]any{"PaymentId": spanner.NullString{}},
			listed:   map[string]any{"Payload": js([]any{"a", "b"})},
			unlisted: map[string]any{"EventType": "x"},
			read: func(ctx ctxT, r reader, x *paymentsdb.ProviderEvent) (*paymentsdb.ProviderEvent, error) {
				return paymentsdb.ReadProviderEvent(ctx, r, x.EventKey)
			},
			readRows: paymentsdb.ReadProviderEventRows,
			del:      func(x *paymentsdb.ProviderEvent) *spanner.Mutation { return paymentsdb.DeleteProviderEvent(x.EventKey) },
		}.run},
		{paymentsdb.ProviderRequestsTable, lc[paymentsdb.ProviderRequest, *paymentsdb.ProviderRequest]{
			values: map[string]any{"IdempotencyKey": "p-1:AUTHORIZE", "PaymentId": "p-1", "Operation": "AUTHORIZE", "Status": "STARTED",
				"Attempts": int64(1), "ResponseStatus": spanner.NullInt64{}, "ResponseBody": spanner.NullString{},
				"LastError": spanner.NullString{}, "CreatedAt": spanner.CommitTimestamp, "UpdatedAt": spanner.CommitTimestamp},
			change:   map[string]any{"Attempts": int64(2), "LastError": str("timeout")},
			listed:   map[string]any{"Status": "SUCCEEDED", "ResponseStatus": i64(200), "ResponseBody": str("{}")},
			unlisted: map[string]any{"Attempts": int64(7)},
			read: func(ctx ctxT, r reader, x *paymentsdb.ProviderRequest) (*paymentsdb.ProviderRequest, error) {
				return paymentsdb.ReadProviderRequest(ctx, r, x.IdempotencyKey)
			},
			readRows: paymentsdb.ReadProviderRequestRows,
			del: func(x *paymentsdb.ProviderRequest) *spanner.Mutation {
				return paymentsdb.DeleteProviderRequest(x.IdempotencyKey)
			},
			indexes: map[string]func(ctxT, reader, *paymentsdb.ProviderRequest) ([]*paymentsdb.ProviderRequest, error){
				"ProviderRequestsByPayment": func(ctx ctxT, r reader, x *paymentsdb.ProviderRequest) ([]*paymentsdb.ProviderRequest, error) {
					return paymentsdb.ReadProviderRequestsByPayment(ctx, r, x.PaymentId)
				},
			},
		}.run},
	}
}

func notificationsCases() []tableCase {
	return []tableCase{
		{notificationsdb.NotificationsTable, lc[notificationsdb.Notification, *notificationsdb.Notification]{
			values: map[string]any{"EventId": "e-1", "Template": "order_confirmed", "OrderId": "o-1", "Recipient": "a@example.com",
				"Subject": "Confirmed", "Body": "Thanks", "Status": "PENDING", "Attempts": int64(0), "LastError": spanner.NullString{},
				"ProviderMessageId": spanner.NullString{}, "CreatedAt": spanner.CommitTimestamp, "UpdatedAt": spanner.CommitTimestamp,
				"SentAt": spanner.NullTime{}, "EventType": str("order.confirmed"), "Language": str("ja"), "HtmlBody": str("<p>Thanks</p>"),
				"MessageId": str("<e-1.order_confirmed@notifications.spanmart>"), "NextAttemptAt": tm(t0), "RetryShard": i64(3)},
			change:   map[string]any{"Attempts": int64(1), "LastError": str("smtp 451"), "NextAttemptAt": tm(t1)},
			listed:   map[string]any{"Status": "SENT", "ProviderMessageId": str("m-1"), "SentAt": tm(t1), "NextAttemptAt": spanner.NullTime{}, "RetryShard": spanner.NullInt64{}},
			unlisted: map[string]any{"Subject": "x"},
			read: func(ctx ctxT, r reader, x *notificationsdb.Notification) (*notificationsdb.Notification, error) {
				return notificationsdb.ReadNotification(ctx, r, x.EventId, x.Template)
			},
			readRows: notificationsdb.ReadNotificationRows,
			del: func(x *notificationsdb.Notification) *spanner.Mutation {
				return notificationsdb.DeleteNotification(x.EventId, x.Template)
			},
			indexes: map[string]func(ctxT, reader, *notificationsdb.Notification) ([]*notificationsdb.Notification, error){
				"NotificationsByOrder": func(ctx ctxT, r reader, x *notificationsdb.Notification) ([]*notificationsdb.Notification, error) {
					return notificationsdb.ReadNotificationsByOrder(ctx, r, x.OrderId)
				},
				"NotificationsToResume": func(ctx ctxT, r reader, x *notificationsdb.Notification) ([]*notificationsdb.Notification, error) {
					if !x.RetryShard.Valid || !x.NextAttemptAt.Valid {
						return nil, errSkip
					}
					return notificationsdb.ReadNotificationsToResume(ctx, r, x.RetryShard.Int64, x.NextAttemptAt.Time)
				},
				"NotificationsToResume by shard": func(ctx ctxT, r reader, x *notificationsdb.Notification) ([]*notificationsdb.Notification, error) {
					if !x.RetryShard.Valid || !x.NextAttemptAt.Valid {
						return nil, errSkip
					}
					return notificationsdb.ReadNotificationsToResumeByRetryShard(ctx, r, x.RetryShard.Int64)
				},
			},
		}.run},
		{notificationsdb.OrderContactsTable, lc[notificationsdb.OrderContact, *notificationsdb.OrderContact]{
			values: map[string]any{"OrderId": "o-1", "CustomerId": "c-1", "Email": "a@example.com", "Language": "ja",
				"EventId": "e-0", "CreatedAt": spanner.CommitTimestamp},
			change:   map[string]any{"Email": "", "Language": "en"},
			listed:   map[string]any{"Email": "b@example.com"},
			unlisted: map[string]any{"Language": "fr"},
			read: func(ctx ctxT, r reader, x *notificationsdb.OrderContact) (*notificationsdb.OrderContact, error) {
				return notificationsdb.ReadOrderContact(ctx, r, x.OrderId)
			},
			readRows: notificationsdb.ReadOrderContactRows,
			del: func(x *notificationsdb.OrderContact) *spanner.Mutation {
				return notificationsdb.DeleteOrderContact(x.OrderId)
			},
		}.run},
	}
}
